package clientdata

import (
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/resource"
)

// Options tune a Client. The zero value is usable.
type Options struct {
	// DoesNotExistTimeout is how long a subscribed resource may go
	// unanswered on a connected stream before watchers are told it does not
	// exist (SotW has no such signal; docs/protocol.md §1.8). Default 15s;
	// negative: never.
	DoesNotExistTimeout time.Duration
	// AltTimeout is how long a name's authority may be unreachable before
	// its #alt= URL is fetched instead. Default 5s.
	AltTimeout time.Duration
	// BackoffBase and BackoffMax bound reconnection backoff (exponential,
	// with jitter). Defaults 100ms and 30s.
	BackoffBase, BackoffMax time.Duration
	// MaxRedirects bounds a chain of TP1 redirects. Default 8.
	MaxRedirects int
	// Validate, when set, is an application's own check of every resource
	// received; an error rejects (NACKs) the resource and keeps its last
	// good value. It runs on the stream's receiving goroutine before the
	// response is applied, with no lock held: it must be quick (the stream
	// reads nothing meanwhile) and must not Close the client.
	Validate func(v *resource.Variant, m proto.Message) error
	// DialOptions are added to every server connection.
	DialOptions []grpc.DialOption
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}
