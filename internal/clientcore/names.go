package clientcore

import "github.com/xdsd/xdsd/client/clientdata"

// Handler is what client.Handler is: a watcher's handler. The face hands
// its own named type in, which this unnamed type accepts as it is.
type Handler = func(clientdata.Event)

// CancelFunc is what client.CancelFunc is: the end of a watch.
type CancelFunc = func() <-chan struct{}
