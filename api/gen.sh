#!/bin/sh
# Regenerates the Go code from the .proto files. The generated code is
# committed, so building Nacre needs neither protoc nor the plugins:
#   apt-get install protobuf-compiler
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
set -e
cd "$(dirname "$0")"
PATH=$PATH:$(go env GOPATH)/bin
protoc -I . --go_out=nacrepb --go_opt=paths=source_relative \
  --go-grpc_out=nacrepb --go-grpc_opt=paths=source_relative *.proto
