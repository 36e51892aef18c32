package protocol

import (
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
)

// SubCost is what a subscription of name with params is counted as
// against the subscription state limits.
func SubCost(typeURL, name string, params map[string]string, locator bool) int64 {
	w := db.NewSub(typeURL, name, constraint.Params(params))
	w.Locator = locator
	return subCost(&w)
}
