package aggregator

import (
	"errors"
	"fmt"
)

// maxClusterNameLen is the longest cluster name ValidateClusterName accepts.
const maxClusterNameLen = 63

// ErrInvalidClusterName is wrapped by the errors of ValidateClusterName.
var ErrInvalidClusterName = errors.New("invalid cluster name")

// ValidateClusterName reports whether name can name a cluster. A cluster name is part of every
// trace's identity (ObjectRef.Cluster), of the audit webhook path /audit/{cluster}, of checkpoint
// file and ConfigMap names, and of link targets, so every part of Kelemetry checks it with this
// one rule: 1 to 63 lowercase ASCII letters, digits, '-', '_' or '.', beginning and ending with a
// letter or a digit (a DNS label that also allows the '_' and '.' found in kubeconfig context
// names). "prod-1" and "eu.west_2" are valid; "Prod", "a/b", "-a" and "" are not.
func ValidateClusterName(name string) error {
	const want = "want 1-63 lowercase letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
	if len(name) > maxClusterNameLen {
		return fmt.Errorf("%w %q (%d characters): %s", ErrInvalidClusterName, truncateName(name), len(name), want)
	}
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
	ok := name != "" && alnum(name[0]) && alnum(name[len(name)-1])
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = alnum(c) || c == '-' || c == '_' || c == '.'
	}
	if !ok {
		return fmt.Errorf("%w %q: %s", ErrInvalidClusterName, name, want)
	}
	return nil
}

// truncateName shortens a long name for an error message.
func truncateName(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
