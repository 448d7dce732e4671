// Command etcd builds the upstream etcd server from the Go module proxy.
//
// `go install go.etcd.io/etcd/server/v3@vX` is refused because etcd's
// server/go.mod carries replace directives (../api, ../client/...), so this
// wrapper module is the main module instead; the body is identical to
// go.etcd.io/etcd/server/v3/main.go. Built by ../build.sh.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
