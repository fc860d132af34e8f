// Types of the UI, for the type checker only (scripts/tsc.sh): the JSON of the HTTP API the UI
// reads, and the shapes the trace page builds from it. The module holds no code.
//
// The API's answers are not trusted: every field the UI reads may be missing or of another type,
// and the code checks before it uses one. The types say what the server sends.

// ---------- the HTTP API ----------

/**
 * The envelope of every answer of the Jaeger-compatible, UI and native APIs
 * (frontend.JaegerResponse).
 * @template T
 * @typedef {object} ApiResponse
 * @property {T} data
 * @property {number} [total]
 * @property {{code?: number, msg: string, traceID?: string}[]} [errors]
 * @property {string} [truncated] what a query budget left out ("result truncated: ...")
 * @property {number} [limit] a search's limit of results
 * @property {boolean} [more] a search has more results than its limit allowed
 * @property {number} [unshown] found objects that no result shown holds
 * @property {boolean} [scanCut] the search stopped counting found objects at its scan limit
 */

/**
 * A tag of a span or a field of a log.
 * @typedef {object} KeyValue
 * @property {string} key
 * @property {string} [type]
 * @property {any} value
 */

/**
 * @typedef {object} JaegerLog
 * @property {number} timestamp Unix microseconds
 * @property {KeyValue[]} fields
 */

/**
 * @typedef {object} JaegerReference
 * @property {string} refType CHILD_OF or FOLLOWS_FROM
 * @property {string} traceID
 * @property {string} spanID
 */

/**
 * @typedef {object} JaegerSpan
 * @property {string} traceID
 * @property {string} spanID
 * @property {string} operationName
 * @property {JaegerReference[]} references
 * @property {number} startTime Unix microseconds
 * @property {number} duration microseconds
 * @property {KeyValue[]} tags
 * @property {JaegerLog[]} logs
 * @property {string} processID
 * @property {string[]} [warnings]
 */

/**
 * A trace of GET /api/traces/{id} (ApiResponse<JaegerTrace[]>).
 * @typedef {object} JaegerTrace
 * @property {string} traceID
 * @property {JaegerSpan[]} spans
 * @property {Object<string, {serviceName: string, tags?: KeyValue[]}>} processes
 * @property {string[]} [warnings]
 */

/**
 * An object as the UI API names it (frontend.SummaryObject); also an object row's key.
 * @typedef {object} ObjectRef
 * @property {string} [cluster]
 * @property {string} [group]
 * @property {string} [resource]
 * @property {string} [namespace]
 * @property {string} [name]
 */

/**
 * A result of GET /api/ui/search (frontend.SearchSummary).
 * @typedef {object} SearchResult
 * @property {string} traceID the display ID of the result
 * @property {ObjectRef} root
 * @property {number} roots
 * @property {ObjectRef} seed the found object
 * @property {number} objects
 * @property {number} events
 * @property {number} omitted
 * @property {string} start RFC 3339
 * @property {string} end RFC 3339
 * @property {string[]} clusters
 * @property {string} [truncated]
 * @property {MatchedEvent[]} [matches] a search on event attributes: the matching events, newest first
 * @property {number} [matchCount] how many events matched in all
 */

/**
 * An event of a search result that the searched event attributes matched.
 * @typedef {object} MatchedEvent
 * @property {string} time RFC 3339
 * @property {ObjectRef} object
 * @property {string} user
 * @property {string} [verb]
 * @property {string} [subresource]
 * @property {string} [code]
 * @property {boolean} [error]
 * @property {string} title
 */

/**
 * The answer of GET /api/ui/suggestions (frontend.Suggestions).
 * @typedef {object} Suggestions
 * @property {string[]} [clusters]
 * @property {{group: string, resource: string}[]} [resources]
 * @property {string[]} [namespaces]
 * @property {string} [oldest] RFC 3339; missing when nothing is stored
 * @property {string} [newest] RFC 3339
 * @property {boolean} [truncated]
 */

/**
 * A step of GET /api/critical-path/{id} (frontend.CriticalStep).
 * @typedef {object} CriticalStep
 * @property {string} spanID
 * @property {string} time
 * @property {string} end
 * @property {number} timeMicros
 * @property {ObjectRef} object
 * @property {string} user
 * @property {string} controller
 * @property {string} verb
 * @property {string} [subresource]
 * @property {string[]} [fields]
 * @property {string} title
 * @property {string} rule
 * @property {number} waitSeconds
 * @property {number} actSeconds
 * @property {boolean} [person] the step's user is a person: its wait is waiting for that person
 * @property {string} [slowPart] the part of the request that took most of its time, from the API
 *   server's own spans ("validating webhook policy.example.com")
 * @property {number} [slowPartSeconds]
 */

/**
 * The answer of GET /api/critical-path/{id} (frontend.CriticalPath).
 * @typedef {object} CriticalPath
 * @property {string} traceID
 * @property {number} durationSeconds
 * @property {CriticalStep[]} steps
 * @property {{controller: string, steps: number, waitSeconds: number, actSeconds: number, person?: boolean}[]} waits
 * @property {ControllerTimes[]} controllers
 * @property {CriticalStep} [slowest] the slowest controller reaction (not a person's, not the start)
 * @property {CriticalStep} [slowestRequest] the step whose request took longest inside the API server
 * @property {number} [personWaitSeconds] the time spent waiting for people
 * @property {number} [unexplainedWaitSeconds] the time before steps no rule explains
 * @property {string} [noPath] why the trace has no critical path (no chain of reactions)
 * @property {string} [truncated]
 */

/**
 * @typedef {object} ControllerTimes
 * @property {string} controller
 * @property {string[]} users
 * @property {number} writes
 * @property {number} reactions
 * @property {number} waitSeconds
 * @property {number} meanWaitSeconds
 * @property {number} maxWaitSeconds
 * @property {number} actSeconds
 * @property {number} maxActSeconds
 */

/**
 * A stored write of GET /api/objects/history (frontend.HistoryMoment).
 * @typedef {object} HistoryMoment
 * @property {string} time RFC 3339, passed as is to /api/objects/at
 * @property {string} event
 * @property {boolean} snapshot
 * @property {number} changes
 * @property {boolean} [gap]
 * @property {string} [resourceVersion]
 */

/**
 * The answer of GET /api/objects/history (frontend.ObjectHistory).
 * @typedef {object} ObjectHistory
 * @property {HistoryMoment[]} [moments]
 * @property {string} [truncated]
 */

/**
 * Where a reconstruction of GET /api/objects/at starts (frontend.StateSource).
 * @typedef {object} StateSource
 * @property {string} snapshotTime RFC 3339
 * @property {string} snapshotKind
 * @property {number} writesApplied
 * @property {string} [resourceVersion] the object's version after the writes
 */

/**
 * The answer of GET /api/objects/at (frontend.ObjectState).
 * @typedef {object} ObjectState
 * @property {any} body the object
 * @property {StateSource} source
 * @property {{from: string, to: string, path?: string, message: string}[]} [gaps]
 * @property {string[]} [untracked]
 */

/**
 * A field change of GET /api/objects/diff (diff.Change).
 * @typedef {object} Change
 * @property {string} path
 * @property {string} op
 * @property {any} [old] the old value; missing when added
 * @property {any} [new] the new value; missing when removed
 * @property {boolean} [redacted]
 */

// ---------- what the UI builds ----------

/**
 * An error of an API call: its message is for the user; status is the HTTP status, 0 when the
 * server was not reached.
 * @typedef {Error & {status: number}} ApiError
 */

/**
 * A display mode of a trace: how objects and events are drawn, and which links are followed.
 * @typedef {object} Mode
 * @property {string} display tracing, grouped, tree or timeline
 * @property {string} link none, full tree, ancestors or descendants
 */

/**
 * The search form's fields, as strings.
 * @typedef {object} FormState
 * @property {string} cluster
 * @property {string} resource
 * @property {string} namespace
 * @property {string} name
 * @property {string} attrs
 * @property {string} range a key of RANGES
 * @property {string} start
 * @property {string} end
 * @property {string} display
 * @property {string} link
 * @property {string} limit
 */

/**
 * @typedef {object} TimeRange
 * @property {Date} start
 * @property {Date} end
 */

/**
 * One drawn row of a trace: an object, event, group, omission or reference span.
 * @typedef {object} TraceNode
 * @property {string} id the span ID
 * @property {JaegerSpan} span
 * @property {Map<string, any>} tags the span's tags, the first of each key
 * @property {string} kind kelemetry.span.kind: object, event, group, omitted, reference, ...
 * @property {string} service
 * @property {string} op
 * @property {number} start Unix microseconds
 * @property {number} end
 * @property {boolean} timed whether the span has its own start time
 * @property {JaegerLog[]} logs
 * @property {TraceNode[]} children
 * @property {TraceNode | null} parent
 * @property {number} depth
 * @property {string | null} ref the span a reference row points to
 * @property {number} descendants
 */

/**
 * A trace as the trace page draws it.
 * @typedef {object} TraceModel
 * @property {string} traceID
 * @property {TraceNode[]} nodes
 * @property {Map<string, TraceNode>} byId
 * @property {TraceNode[]} roots
 * @property {number} t0 the timeline's start, Unix microseconds
 * @property {number} t1 its end (at least MIN_SCALE_US after t0)
 * @property {number} duration the spans' own duration
 * @property {number} objects
 * @property {number} events
 * @property {number} omitted
 * @property {string[]} warnings
 */

/**
 * An event, from a folded log or an event span, as the detail panel shows it.
 * @typedef {object} EventInfo
 * @property {string} title
 * @property {string} source
 * @property {number} time
 * @property {number} end
 * @property {string} user
 * @property {string} userAgent
 * @property {string} code
 * @property {string} sourceIP
 * @property {string} action
 * @property {string[]} diff
 * @property {string[]} verboseDiff
 * @property {string[]} diffNotes notes about the diff: none available and why, a no-op, the
 *   request's patch shown instead
 * @property {string} snapshot
 * @property {string[]} errors
 * @property {string[]} messages
 * @property {[string, string][]} other
 * @property {[string, string][]} attrs
 * @property {TraceNode} owner
 * @property {boolean} warning
 * @property {string} auditLevel the audit policy's level of the request (Metadata: no bodies)
 * @property {{reason: string, count: string, reportingController: string, firstSeen: string, lastSeen: string} | null} k8s
 *   a Kubernetes Event's facts
 * @property {RequestPart[]} request kube-apiserver's own spans of the request, depth first
 */

/**
 * One span of a request inside the API server (the folded event's "request" field, or a request
 * row in the tree and timeline modes).
 * @typedef {object} RequestPart
 * @property {string} name
 * @property {string} [detail] the webhook or etcd key it waited for
 * @property {number} start Unix microseconds
 * @property {number} duration microseconds
 * @property {number} depth 0 for the request's entry
 * @property {boolean} [error]
 */

/**
 * The critical path's steps, keyed for the chart.
 * @typedef {object} CriticalMarks
 * @property {Set<string>} spans event span IDs
 * @property {Set<string>} logs folded events, by stepKey(object, time)
 * @property {Set<string>} objects stepKey(object, '')
 * @property {CriticalStep[]} steps
 */

/**
 * The object panel's time slider.
 * @typedef {object} HistoryState
 * @property {number} seq the latest request
 * @property {number} timer
 * @property {number} shown the moment whose object is shown, -1 before the first answer
 */

/**
 * The live trace page.
 * @typedef {object} TraceView
 * @property {string} id the trace ID of the URL
 * @property {TraceModel} model
 * @property {Mode | null} mode null when the ID names no display mode
 * @property {Set<string>} collapsed IDs of the collapsed rows
 * @property {TraceNode[]} visible the rows not hidden by a collapsed ancestor, in order
 * @property {TraceNode | null} selected
 * @property {number | null} selectedLog the selected folded event of the selected row
 * @property {HTMLDivElement} rowsEl
 * @property {HTMLDivElement} spacer
 * @property {HTMLElement} detail
 * @property {number} frame the pending animation frame, 0 when none
 * @property {(() => void) | null} cleanup
 * @property {Map<number, {node: TraceNode, el: HTMLElement}> | null} drawn the rows in the page by index
 * @property {CriticalMarks | null} critical
 * @property {HTMLDetailsElement} criticalEl
 * @property {HistoryState | null} history
 * @property {HTMLDivElement} gantt
 * @property {{from: number, to: number} | null} zoom the time range shown (µs), null: the whole trace
 * @property {HTMLDivElement | null} axisTl the axis's timeline column (its width is the rows')
 * @property {HTMLDivElement | null} minimap the whole trace's strip with the zoom window
 * @property {Map<string, string>} urlState the open panels' state the URL keeps (moment, compare, critical)
 * @property {URLSearchParams} initial the URL's parameters when the page was drawn
 */

export {};

/**
 * One write of GET /api/changes.
 * @typedef {object} FeedChange
 * @property {string} time
 * @property {string} end
 * @property {{cluster: string, group: string, resource: string, namespace: string, name: string}} object
 * @property {string} user
 * @property {string} [impersonator]
 * @property {string} userKind person, controller or node
 * @property {string} [userAgent]
 * @property {string} verb
 * @property {string} [subresource]
 * @property {number} code
 * @property {string} outcome ok or failed
 * @property {string} title
 * @property {string[]} paths
 * @property {string[]} [diff]
 * @property {string} traceID
 * @property {string} spanID
 * @property {{trace: string, objectAt: string}} links
 */
