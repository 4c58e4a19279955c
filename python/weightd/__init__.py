"""weightd: model weights as first-class citizens of a store master — the Python client.

    import weightd

    weightd.weight_put("./tiny-model", "default/tiny@main")          # import a directory
    with weightd.weight_get("default/tiny@main", ttl=30) as rev:     # read under a lease
        tensors = rev.open_safetensors("model.safetensors")

The modules, one concept each:
    client       Client: one method per RPC, typed errors, finite timeouts
    rpc          a Client call: request from keywords, timeout, retries; streams
    objects      Client's ObjectService methods (put_object, get_object, …)
    errors       WeightdError and one subclass per SPEC §5 code
    ids          revision ids: text form, group id, manifest key
    transfer     model directories in and out (weightctl import/export, upsert)
    model_files  a model's files: a directory walked and checked, or in memory
    upload       a revision's payloads and manifest put (the plan, in parallel)
    download     a manifest's files written out, checked (export)
    lease        HeldLease, LeasedRevision (what weight_get yields)
    watch        Watch: journal events, resumed across breaks
    safetensors  a minimal safetensors reader/writer
    planner      the MIXED planner
    surface      the weight_* functions (re-exported here)
"""

from .client import Client, new_request_id
from .errors import (
    Busy, Conflict, DataLoss, DeadlineExceeded, DurabilityFailed, GenerationExhausted, Internal,
    InvalidArgument, LeaseExpired, ManagedObject, NoAvailableSpace, NotFound, NotReady,
    ObjectAlreadyExists, ObjectHasLease, PermissionDenied, PolicyUnsatisfiable,
    ResourceExhausted, StaleGeneration, Unauthenticated, Unavailable, Unimplemented, NotLeader,
    WeightdError)
from .ids import format_id, parse_id
from .lease import HeldLease, LeasedRevision
from .surface import (
    default_client, history, make_policy, set_default_client, watch, weight_get,
    weight_get_metadata, weight_get_operation, weight_get_size, weight_is_exist, weight_list,
    weight_migrate, weight_put, weight_remove, weight_update_policy, weight_upsert)
from .watch import Watch
from ._proto import events_pb2, weightd_pb2

__version__ = "0.1.0"

__all__ = [
    "Client", "new_request_id", "format_id", "parse_id", "HeldLease", "LeasedRevision", "Watch",
    "events_pb2", "weightd_pb2",
    "default_client", "set_default_client", "make_policy", "weight_put", "weight_upsert",
    "weight_get", "weight_is_exist", "weight_get_metadata", "weight_get_size", "weight_list",
    "weight_update_policy", "weight_migrate", "weight_get_operation", "weight_remove",
    "history", "watch",
    "WeightdError", "InvalidArgument", "NotFound", "Conflict", "StaleGeneration", "NotReady",
    "Busy", "LeaseExpired", "PolicyUnsatisfiable", "GenerationExhausted", "DurabilityFailed",
    "ManagedObject", "ObjectHasLease", "ObjectAlreadyExists", "NoAvailableSpace",
    "Unauthenticated", "PermissionDenied", "DataLoss", "Internal", "ResourceExhausted",
    "Unimplemented", "NotLeader", "Unavailable", "DeadlineExceeded",
]
