package nodebus

import (
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/tunnel"
)

// Serve takes the commands other nodes send to hub's node and hands each
// to hub.Receive, which acknowledges it at once and answers with its
// recorded outcome; call it before bus.Run. One Hub serves a Bus.
func Serve(bus *Bus, hub *tunnel.Hub) {
	node := hub.Node()
	bus.addHandler("tunnel.forward."+node, commandsTopic(node), "", func(msg *message.Message) ([]*message.Message, error) {
		cmd, err := decodeCommand(msg.Payload)
		if err != nil {
			return nil, err
		}
		ack := func() {
			if err := bus.publishAck(msg); err != nil {
				bus.logger.Warn("forward acknowledgement lost", "attempt_id", cmd.AttemptID, "error", err)
			}
		}
		answer := func(out domain.ForwardOutcome, err error) {
			r := reply{Outcome: out}
			if err != nil {
				r = errorReply(cmd.AttemptID, err)
			}
			if err := bus.publishReply(msg, r); err != nil {
				bus.logger.Error("forward reply lost", "attempt_id", cmd.AttemptID, "error", err)
			}
		}
		hub.Receive(cmd, ack, answer)
		return nil, nil
	})
}
