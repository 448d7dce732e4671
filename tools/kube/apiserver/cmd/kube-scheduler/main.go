// Command kube-scheduler is a thin wrapper that builds the upstream kube-scheduler from the Go module
// proxy, at the Kubernetes version of the kube-apiserver next to it: it mirrors
// k8s.io/kubernetes/cmd/kube-scheduler/scheduler.go; the module wiring is ../../go.mod. Built by
// ../../../build.sh for the test harness's single-node cluster.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version" // for version metric registration
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	command := app.NewSchedulerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
