package constraint

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Variant names one variant of a resource for validation and error messages.
type Variant struct {
	ID          string // how errors refer to the variant, e.g. a file and document index
	Constraints Constraints
}

// KeySetError reports two variants of one resource that constrain different
// sets of keys. TP2 requires the same set for every variant: otherwise a
// client that sends a key only some variants mention (the server adding a
// key before its clients do) can match more than one.
type KeySetError struct {
	A, B         string   // variant IDs; A is the first variant
	AKeys, BKeys []string // their sorted key sets
}

// Error names both variants and both key sets.
func (e *KeySetError) Error() string {
	return fmt.Sprintf("variant %s constrains %s but variant %s constrains %s (every variant of a resource must constrain the same keys)",
		e.A, keyList(e.AKeys), e.B, keyList(e.BKeys))
}

func keyList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = quote(k)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// OverlapError reports two variants of one resource that both match some
// parameter set, which TP2 leaves undefined; Witness is one such set, so the
// author can see the ambiguity instead of having to find it.
type OverlapError struct {
	A, B    string // variant IDs, in input order
	Witness Params // matched by both variants
}

// Error renders `variants A and B overlap: both match {env=test}`.
func (e *OverlapError) Error() string {
	return fmt.Sprintf("variants %s and %s overlap: both match %s", e.A, e.B, e.Witness)
}

// ValidateVariants checks TP2's rules for the variants of ONE resource: all
// variants constrain the same set of keys, and no two can match one parameter
// set. One variant (or none) is always valid, and a variant that can match
// nothing (such as `false`) is allowed. The result is nil or an errors.Join
// of every problem, key-set errors first (each variant against the first),
// then overlaps, pairs in input order, so the message is deterministic;
// errors.As finds *KeySetError and *OverlapError.
func ValidateVariants(vs []Variant) error {
	if len(vs) < 2 {
		return nil
	}
	var errs []error
	keys := make([][]string, len(vs))
	for i, v := range vs {
		keys[i] = v.Constraints.Keys()
	}
	for i := 1; i < len(vs); i++ {
		if !slices.Equal(keys[0], keys[i]) {
			errs = append(errs, &KeySetError{A: vs[0].ID, B: vs[i].ID, AKeys: keys[0], BKeys: keys[i]})
		}
	}
	conj := make([][]term, len(vs))
	for i, v := range vs {
		conj[i] = conjuncts(nil, v.Constraints.n, false)
	}
	budget := searchSteps
	for i := range vs {
		for j := i + 1; j < len(vs); j++ {
			w, ok, err := overlap(conj[i], conj[j], &budget)
			if err != nil {
				errs = append(errs, fmt.Errorf("variants %s and %s: %w", vs[i].ID, vs[j].ID, err))
				return errors.Join(errs...)
			}
			if ok {
				errs = append(errs, &OverlapError{A: vs[i].ID, B: vs[j].ID, Witness: w})
			}
		}
	}
	return errors.Join(errs...)
}

// MaxSearchSteps bounds the work ValidateVariants spends deciding overlaps.
// Deciding overlap exactly is NP-hard in general (a crafted variant set can
// encode SAT), so an adversarial set gets ErrTooComplex instead of hanging
// an apply; real variant sets need a tiny fraction of it.
const MaxSearchSteps = 1 << 21

// searchSteps is MaxSearchSteps; tests lower it.
var searchSteps = MaxSearchSteps

// ErrTooComplex is returned when deciding overlaps would exceed
// MaxSearchSteps.
var ErrTooComplex = errors.New("constraints too complex to check for overlap; simplify them")

// Overlap decides exactly whether some parameter set matches both a and b,
// and if so returns one. The witness is deterministic: independent groups of
// keys are solved separately, and within a group keys are tried in sorted
// order with values in the order literal values (sorted), absent, any other
// value; keys that do not matter are left out.
// It returns ErrTooComplex when the search would exceed MaxSearchSteps.
func Overlap(a, b Constraints) (witness Params, ok bool, err error) {
	budget := searchSteps
	return overlap(conjuncts(nil, a.n, false), conjuncts(nil, b.n, false), &budget)
}

// term is a possibly negated subexpression that must be true.
type term struct {
	n   *node
	neg bool
}

// conjuncts splits the expression (negated if neg) into terms that must all
// hold, pushing negation through OR (De Morgan) so that more of the problem
// falls apart into independent groups of keys. The constant false is kept as
// a term; true contributes none.
func conjuncts(dst []term, n *node, neg bool) []term {
	switch {
	case n == nil:
		if neg {
			dst = append(dst, term{falseNode, false})
		}
	case n.op == opFalse:
		if !neg {
			dst = append(dst, term{falseNode, false})
		}
	case n.op == opNot:
		dst = conjuncts(dst, n.kids[0], !neg)
	case n.op == opAnd && !neg, n.op == opOr && neg:
		for _, k := range n.kids {
			dst = conjuncts(dst, k, neg)
		}
	default:
		dst = append(dst, term{n, neg})
	}
	return dst
}

func overlap(a, b []term, budget *int) (Params, bool, error) {
	terms := make([]term, 0, len(a)+len(b))
	terms = append(append(terms, a...), b...)

	// Number the keys in sorted order and group terms by shared keys with a
	// union-find: groups constrain disjoint keys, so their conjunction is
	// satisfiable iff each group is, and solving them apart avoids
	// searching the product of their assignments.
	keyIdx := map[string]int{}
	var keys []string
	termKeys := make([][]int, len(terms))
	for _, t := range terms {
		if t.n.op == opFalse {
			return nil, false, nil
		}
		t.n.walkKeys(func(k string) {
			if _, ok := keyIdx[k]; !ok {
				keyIdx[k] = -1
				keys = append(keys, k)
			}
		})
	}
	slices.Sort(keys)
	for i, k := range keys {
		keyIdx[k] = i
	}
	parent := make([]int, len(keys))
	for i := range parent {
		parent[i] = i
	}
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	for i, t := range terms {
		t.n.walkKeys(func(k string) { termKeys[i] = append(termKeys[i], keyIdx[k]) })
		for _, k := range termKeys[i][1:] {
			ra, rb := find(termKeys[i][0]), find(k)
			if ra != rb {
				parent[max(ra, rb)] = min(ra, rb) // the root is the group's smallest key
			}
		}
	}

	witness := Params{}
	var groupTerms []term
	var groupKeys []string
	for root := range keys {
		if find(root) != root {
			continue
		}
		groupTerms, groupKeys = groupTerms[:0], groupKeys[:0]
		for i, t := range terms {
			if find(termKeys[i][0]) == root {
				groupTerms = append(groupTerms, t)
			}
		}
		for i, k := range keys {
			if find(i) == root {
				groupKeys = append(groupKeys, k)
			}
		}
		ok, err := solve(groupTerms, groupKeys, witness, budget)
		if err != nil || !ok {
			return nil, false, err
		}
	}
	return witness, true, nil
}

// tri is a three-valued truth value for partially assigned parameters.
type tri uint8

const (
	unknown tri = iota
	no
	yes
)

// cnode is a node compiled for search: keys and values are small integers.
type cnode struct {
	op   op
	key  int // index into search.keys
	val  int // index into search.domain[key]
	kids []*cnode
}

// search finds an assignment of the keys of one group that satisfies all of
// its terms. Per key only these values can be told apart by the terms: each
// literal they compare the key with, absent, and "anything else", so trying
// those is exact.
type search struct {
	keys   []string
	domain [][]string // per key: sorted literals; then absent and other are indexes len and len+1
	terms  []*cnode
	asg    []int // per key: index into domain, or -1 while unassigned
	marks  []int // keys of unassigned leaves that still decide the outcome
	budget *int  // search steps left, shared by all the pairs of one check
}

func solve(terms []term, keys []string, witness Params, budget *int) (bool, error) {
	s := &search{keys: keys, domain: make([][]string, len(keys)), asg: make([]int, len(keys)), budget: budget}
	idx := make(map[string]int, len(keys))
	for i, k := range keys {
		idx[k] = i
		s.asg[i] = -1
	}
	for _, t := range terms {
		t.n.walkValues(func(k, v string) { s.domain[idx[k]] = append(s.domain[idx[k]], v) })
	}
	for i := range s.domain {
		slices.Sort(s.domain[i])
		s.domain[i] = slices.Compact(s.domain[i])
	}
	for _, t := range terms {
		c := s.compile(t.n, idx)
		if t.neg {
			c = &cnode{op: opNot, kids: []*cnode{c}}
		}
		s.terms = append(s.terms, c)
	}
	if !s.dfs() {
		if *s.budget < 0 {
			return false, ErrTooComplex
		}
		return false, nil
	}
	for i, a := range s.asg {
		lits := s.domain[i]
		switch {
		case a < 0 || a == len(lits): // unassigned or absent
		case a < len(lits):
			witness[keys[i]] = lits[a]
		default:
			witness[keys[i]] = otherValue(lits)
		}
	}
	return true, nil
}

// otherValue picks a concrete value outside lits for the witness: the
// "any other value" of the search must be printable.
func otherValue(lits []string) string {
	for i := 0; ; i++ {
		v := "other"
		if i > 0 {
			v += strconv.Itoa(i)
		}
		if _, found := slices.BinarySearch(lits, v); !found {
			return v
		}
	}
}

func (n *node) walkValues(f func(k, v string)) {
	switch n.op {
	case opValue:
		f(n.key, n.value)
	case opNot, opAnd, opOr:
		for _, k := range n.kids {
			k.walkValues(f)
		}
	}
}

func (s *search) compile(n *node, idx map[string]int) *cnode {
	c := &cnode{op: n.op}
	switch n.op {
	case opValue:
		c.key = idx[n.key]
		c.val, _ = slices.BinarySearch(s.domain[c.key], n.value)
	case opExists:
		c.key = idx[n.key]
	default:
		c.kids = make([]*cnode, len(n.kids))
		for i, k := range n.kids {
			c.kids[i] = s.compile(k, idx)
		}
	}
	return c
}

// dfs assigns, one at a time, the smallest-numbered key that still matters,
// and backtracks as soon as a term is decided false. Keys that no undecided
// leaf mentions are never branched on, so they stay out of the witness and
// do not multiply the search.
func (s *search) dfs() bool {
	if *s.budget--; *s.budget < 0 {
		return false
	}
	s.marks = s.marks[:0]
	for _, t := range s.terms {
		if s.eval(t) == no {
			return false
		}
	}
	if len(s.marks) == 0 {
		return true // every term is decided true
	}
	k := slices.Min(s.marks)
	for v := range len(s.domain[k]) + 2 {
		s.asg[k] = v
		if s.dfs() {
			return true
		}
	}
	s.asg[k] = -1
	return false
}

// eval evaluates c under the partial assignment. As a side effect it leaves
// in s.marks the keys of unassigned leaves under c that can still change an
// undecided result; a subtree that turns out decided takes its marks back.
func (s *search) eval(c *cnode) tri {
	switch c.op {
	case opValue, opExists:
		a := s.asg[c.key]
		switch {
		case a < 0:
			s.marks = append(s.marks, c.key)
			return unknown
		case c.op == opValue && a == c.val:
			return yes
		case c.op == opExists && a != len(s.domain[c.key]):
			return yes
		}
		return no
	case opNot:
		switch s.eval(c.kids[0]) {
		case yes:
			return no
		case no:
			return yes
		}
		return unknown
	case opAnd, opOr:
		stop, cont := no, yes // AND: a false operand decides it
		if c.op == opOr {
			stop, cont = yes, no
		}
		mark := len(s.marks)
		res := cont
		for _, k := range c.kids {
			switch s.eval(k) {
			case stop:
				s.marks = s.marks[:mark]
				return stop
			case unknown:
				res = unknown
			}
		}
		return res
	}
	return no // opFalse
}
