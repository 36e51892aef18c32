// Package admin is xdsd's HTTP admin interface: health and readiness,
// Prometheus metrics, the resources a server holds (with their TP2
// constraints in text syntax and their versions), an apply and delete API,
// and the connected clients. Any role may mount it; it imports the layers
// below it, and nothing imports it but the roles and the binary.
package admin
