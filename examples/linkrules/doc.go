// Package linkrules holds example LinkRules (the YAML files of this folder), ready for
// `kubectl apply -f` once deploy/crds is applied, or for the all-in-one's --link-rules flag. Its
// test evaluates each of them on sample objects.
package linkrules
