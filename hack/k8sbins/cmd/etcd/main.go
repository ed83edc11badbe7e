// Command etcd is etcd v3.7.0 built from its Go module, so tests need no
// release download: see doc.go.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
