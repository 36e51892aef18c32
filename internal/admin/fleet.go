package admin

import (
	"errors"
	"net/http"

	"github.com/xdsd/xdsd/internal/fleet"
)

// GroupList is the body of GET /v1/groups: the connected clients by agent
// and parameter set, fleet-wide (every live replica's).
type GroupList struct {
	Groups []fleet.Group `json:"groups"`
	// Unreachable are the replicas that did not answer: their clients
	// are not counted.
	Unreachable []fleet.Unreachable `json:"unreachable_replicas,omitempty"`
}

// groups answers GET /v1/groups from Options.Groups.
func (a *api) groups(w http.ResponseWriter, r *http.Request) {
	if a.o.Groups == nil {
		writeError(w, http.StatusNotFound, errors.New("this process serves no clients"))
		return
	}
	gs, failed, err := a.fleetGroups(r)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	markIncomplete(w, failed)
	if gs == nil {
		gs = []fleet.Group{}
	}
	writeJSON(w, http.StatusOK, GroupList{Groups: gs, Unreachable: failed})
}
