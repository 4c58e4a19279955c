# cmake -DDIR=<dir> -P fix_proto_imports.cmake
#
# protoc writes `import events_pb2 as events__pb2` (and `import weightd_pb2
# as ...` in the grpc module): top-level imports. Inside the package
# weightd._proto they must be relative: `from . import events_pb2 as ...`.
# setup.py does the same for `pip install ./python`.
foreach(name weightd_pb2.py weightd_pb2_grpc.py)
  file(READ ${DIR}/${name} text)
  string(REGEX REPLACE "(^|\n)import (events_pb2|weightd_pb2) as " "\\1from . import \\2 as "
         text "${text}")
  file(WRITE ${DIR}/${name} "${text}")
endforeach()
