// Command kube-controller-manager is a thin wrapper that builds the upstream kube-controller-manager from the Go module
// proxy, at the Kubernetes version of the kube-apiserver next to it: it mirrors
// k8s.io/kubernetes/cmd/kube-controller-manager/controller-manager.go; the module wiring is ../../go.mod. Built by
// ../../../build.sh for the test harness's single-node cluster.
package main

import (
	"os"
	_ "time/tzdata" // for CronJob Time Zone support

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugin
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	command := app.NewControllerManagerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
