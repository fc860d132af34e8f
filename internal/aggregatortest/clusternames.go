package aggregatortest

// clusterNameCase is a cluster name and whether aggregator.ValidateClusterName accepts it.
type clusterNameCase struct {
	Name  string
	Valid bool
}

// ClusterNames are the cluster names every entry point that takes one (configuration, webhook
// path, log replay, Event watch, link rules) must accept or reject alike, as
// aggregator.ValidateClusterName does.
var ClusterNames = []clusterNameCase{
	{Name: "prod-1", Valid: true},
	{Name: "eu.west_2", Valid: true},
	{Name: "Prod", Valid: false},
	{Name: "a/b", Valid: false},
	{Name: "a b", Valid: false},
	{Name: "-prod", Valid: false},
	{Name: "x234567890123456789012345678901234567890123456789012345678901234", Valid: false}, // 64
}
