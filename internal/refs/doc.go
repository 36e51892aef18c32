// Package refs follows the references between xDS resources the way a
// client does, for each TP2 parameter set: a listener names route
// configurations (RDS), extension configs (ECDS) and secrets (SDS); a
// route configuration names clusters; a cluster names its endpoints (EDS),
// other clusters (aggregate) and secrets; a redirect or a list collection
// names its targets. A client with parameters P subscribes to each name it
// meets and gets the one variant of it that matches P (TP2), so what a
// reference resolves to, and whether it resolves, depends on P.
//
// Of finds the references of one resource; a Set holds the variants of
// many, Resolve follows the chain a client with given parameters resolves
// from any resource, and Dangling finds every reference that some
// parameter set the variants tell apart cannot resolve. Only references a
// client follows over ADS (config source ads or self, or an xdstp:// name)
// to an authority the set serves are followed: the rest are some other
// server's.
//
// It imports resource, constraint and name; the authoring tools (validate,
// apply) and anything that prints or checks chains use it.
package refs
