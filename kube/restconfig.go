package kube

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// restConfig loads the rest.Config of a cluster from its kubeconfig file and context, with the
// cluster's QPS and Burst (zero: DefaultQPS and DefaultBurst) and the user agent "kelemetry".
func restConfig(cc ClusterConfig) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: cc.Kubeconfig}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: cc.Context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: kubeconfig %s: %w", cc.Name, cc.Kubeconfig, err)
	}
	rc.UserAgent = "kelemetry"
	rc.QPS, rc.Burst = cc.QPS, cc.Burst
	if rc.QPS == 0 {
		rc.QPS = DefaultQPS
	}
	if rc.Burst == 0 {
		rc.Burst = DefaultBurst
	}
	return rc, nil
}

// newClusters validates cfg and builds RESTClusters from the kubeconfigs of its clusters. It
// returns nil, and no error, when cfg names no cluster.
func newClusters(cfg Config) (*RESTClusters, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Clusters) == 0 {
		return nil, nil
	}
	configs := make(map[string]*rest.Config, len(cfg.Clusters))
	for _, cc := range cfg.WithDefaults().Clusters {
		rc, err := restConfig(cc)
		if err != nil {
			return nil, err
		}
		configs[cc.Name] = rc
	}
	return newRESTClusters(configs), nil
}
