#!/bin/sh
# Regenerates the Go code from the .proto files. The generated code is
# committed, so building Nacre needs neither protoc nor the plugins:
#   apt-get install protobuf-compiler
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
# Messages go to nacrepb; the services of services.proto, and only they, to
# nacregrpc (the one package that links gRPC).
set -e
cd "$(dirname "$0")"
PATH=$PATH:$(go env GOPATH)/bin
rm -f nacrepb/*.pb.go nacregrpc/*.pb.go # keeps doc.go
mkdir -p nacregrpc
protoc -I . --go_out=.. --go_opt=module=nacre \
  --go-grpc_out=.. --go-grpc_opt=module=nacre *.proto
