package egress

import (
	"context"
	"errors"
	"net"
	"sync"
)

// serveConns is the accept loop of the proxy and of the DNS stub over TCP:
// it accepts connections on l until ctx ends or l fails, and closes l. Each
// connection is handled in its own goroutine while it holds one of slots,
// and closed after, or as soon as ctx ends; one that finds every slot taken
// is given to refuse, then closed. serveConns returns once every handler
// has.
func serveConns(ctx context.Context, l net.Listener, slots chan struct{}, refuse, handle func(net.Conn)) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		select {
		case slots <- struct{}{}:
		default:
			refuse(c)
			c.Close()
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			handle(c)
		})
	}
}
