"""Builds the weightd package with its generated gRPC stubs.

Metadata is in pyproject.toml; this file only adds the one build step
setuptools cannot express: protoc + grpc_python_plugin over the contract
(../api/weightd.proto, which imports ../events/events.proto as
"events.proto"), writing weightd/_proto/*_pb2*.py into the build tree, with
protoc's top-level `import events_pb2` made package-relative — the same
thing python/CMakeLists.txt does for build/python.

Tools: $PROTOC or protoc on PATH; $GRPC_PYTHON_PLUGIN or grpc_python_plugin
on PATH (Debian: protobuf-compiler, protobuf-compiler-grpc).
"""

import os
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIRS = [os.path.join(HERE, "..", "api"), os.path.join(HERE, "..", "events")]
# protoc writes `import events_pb2 as events__pb2`: inside a package that
# must be `from . import events_pb2 as events__pb2`.
TOP_LEVEL_IMPORT = re.compile(r"^import (events_pb2|weightd_pb2) as ", re.MULTILINE)


def tool(env, name):
    path = os.environ.get(env) or shutil.which(name)
    if not path:
        raise SystemExit(f"weightd: {name} not found (set {env}); on Debian: "
                         "apt-get install protobuf-compiler protobuf-compiler-grpc")
    return path


def generate_stubs(out_dir):
    """Writes events_pb2.py, weightd_pb2.py and weightd_pb2_grpc.py into out_dir."""
    for d in PROTO_DIRS:
        if not os.path.isdir(d):
            raise SystemExit(f"weightd: {os.path.normpath(d)} is missing: build from the "
                             "weightd source tree (python/ beside api/ and events/)")
    protoc, plugin = tool("PROTOC", "protoc"), tool("GRPC_PYTHON_PLUGIN", "grpc_python_plugin")
    os.makedirs(out_dir, exist_ok=True)
    includes = [f"--proto_path={d}" for d in PROTO_DIRS]
    subprocess.check_call([protoc, *includes, f"--python_out={out_dir}",
                           os.path.join(PROTO_DIRS[1], "events.proto")])
    subprocess.check_call([protoc, *includes, f"--python_out={out_dir}",
                           f"--plugin=protoc-gen-grpc_python={plugin}",
                           f"--grpc_python_out={out_dir}",
                           os.path.join(PROTO_DIRS[0], "weightd.proto")])
    for name in ("weightd_pb2.py", "weightd_pb2_grpc.py"):
        path = os.path.join(out_dir, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(TOP_LEVEL_IMPORT.sub(r"from . import \1 as ", text))


class build_py_with_stubs(build_py):
    def run(self):
        super().run()
        generate_stubs(os.path.join(self.build_lib, "weightd", "_proto"))


setup(cmdclass={"build_py": build_py_with_stubs})
