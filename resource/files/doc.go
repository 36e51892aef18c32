// Package files reads authoring files: one file, every *.yaml, *.yml and
// *.json file under a directory, or standard input. It is the file-system
// side of the authoring format; package resource, the model, decodes and
// validates what these files hold from bytes or a reader and touches no
// file system.
//
// It is public because embedders need it: a program that serves resources
// kept as files in a directory, as xdsd apply and serve --watch do, loads
// them with Load and hands the documents to server.Apply (examples/demo
// does). Only regular files in a directory are read (Open): a FIFO or a
// device named *.yaml is an error naming it, not a reader blocked forever.
package files
