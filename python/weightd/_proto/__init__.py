"""The generated gRPC contract: api/weightd.proto and events/events.proto.

The modules beside this file (events_pb2, weightd_pb2, weightd_pb2_grpc) are
written at build time by protoc and grpc_python_plugin — by the CMake target
`weightd_python` into build/python/weightd/_proto/, or by `pip install
./python` (setup.py's build_py). protoc writes `import events_pb2`, a
top-level import; the build rewrites it to `from . import events_pb2` so the
stubs live inside this package and cannot clash with another events_pb2.
"""

try:
    from . import events_pb2, weightd_pb2, weightd_pb2_grpc
except ImportError as e:  # pragma: no cover - only without generated stubs
    raise ImportError(
        "weightd's generated gRPC stubs are missing: build the CMake target "
        "weightd_python and put build/python on PYTHONPATH, or run "
        "`pip install --no-build-isolation ./python` (" + str(e) + ")"
    ) from e

__all__ = ["events_pb2", "weightd_pb2", "weightd_pb2_grpc"]
