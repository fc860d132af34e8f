package frontend

import (
	"github.com/kelemetry/kelemetry/internal/query"
)

// Config configures the query side: how far links are followed, what one request may spend
// (spans read, bytes rendered, time) and how many heavy requests run at once. Zero fields mean
// the defaults. Its fields, Validate and WithDefaults are documented on the type it names.
type Config = query.Config
