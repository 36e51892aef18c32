package admin

import (
	"errors"
	"net/http"

	"github.com/xdsd/xdsd/internal/clientcheck"
)

// DryRunResult is the body of POST /v1/apply?dry_run=true: what the apply
// would do, and whether it would be refused, with nothing stored.
type DryRunResult struct {
	// DryRun is always true: a client that asked for a dry run checks it,
	// so that a server that does not know dry_run (and applied the
	// batch) is not taken for one that did not.
	DryRun bool `json:"dry_run"`
	// Revision is the store revision the batch was checked against.
	Revision int64 `json:"revision"`
	// Documents counts the batch's variants.
	Documents int `json:"documents"`
	// Refused is what the apply would answer if it were refused (the
	// client checks, or clients it would strand), "" if it would go
	// ahead; Errors lists the refusal's findings or stranded clients.
	Refused string     `json:"refused,omitempty"`
	Errors  []DocError `json:"errors,omitempty"`
	// Findings are every finding of the client checks, warnings too.
	Findings []DocError `json:"findings,omitempty"`
	// Checked says the client checks ran; Groups are the connected and
	// declared groups they checked for, each with what the batch would
	// change for it (none when no client is known).
	Checked bool                    `json:"checked"`
	Groups  []clientcheck.GroupPlan `json:"groups"`
}

// dryRun answers an apply with dry_run=true: the batch is read and
// checked as an apply's, its payloads are not prewritten, and nothing is
// stored. A batch with invalid documents is answered as an apply's (400);
// one the checks or the guard would refuse is answered 200 with Refused
// set, so that the plan is shown either way.
func (a *api) dryRun(w http.ResponseWriter, r *http.Request, b *batch) {
	rev := a.o.Store.Rev()
	status, err := a.readBatch(w, r, b)
	if err != nil {
		writeError(w, status, err)
		return
	}
	res := DryRunResult{DryRun: true, Revision: rev, Documents: len(b.batch.Puts), Checked: b.checked != nil, Groups: []clientcheck.GroupPlan{}}
	for _, f := range b.findings {
		res.Findings = append(res.Findings, findingError(f))
	}
	res.Findings = append(res.Findings, b.notes...)
	refusal := b.refusal
	if refusal == nil {
		failed, err := a.stranded(r, b.batch)
		res.Findings = append(res.Findings, unreachableNotes(failed, "the stranded-client guard did not check its clients")...)
		if err != nil {
			var se *StrandedError
			if !errors.As(err, &se) {
				writeError(w, http.StatusInternalServerError, err)
				return
			}
			if r.URL.Query().Get("force") != "true" {
				refusal = err
			}
		}
	}
	if refusal != nil {
		var rej *rejected
		if errors.As(refusal, &rej) {
			for _, f := range rej.findings {
				if f.Severity == clientcheck.Error {
					res.Errors = append(res.Errors, findingError(f))
				}
			}
		}
		res.Refused = refusal.Error()
	}
	if b.checked != nil {
		if plan := b.checked.Plan(b.before, b.findings, listLimit(r)); plan != nil {
			res.Groups = plan
		}
	}
	writeJSON(w, http.StatusOK, res)
}
