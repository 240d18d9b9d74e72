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
		// ack and answer hold where to reply, not msg: its payload is
		// the request, which the Hub holds only as long as it counts it.
		to := replyAddress(msg)
		attemptID := cmd.AttemptID
		ack := func() {
			if err := bus.publishAck(to); err != nil {
				bus.logger.Warn("forward acknowledgement lost", "attempt_id", attemptID, "error", err)
			}
		}
		answer := func(out domain.ForwardOutcome, err error) {
			r := reply{Outcome: out}
			if err != nil {
				r = errorReply(attemptID, err)
			}
			if err := bus.publishReply(to, r); err != nil {
				bus.logger.Error("forward reply lost", "attempt_id", attemptID, "error", err)
			}
		}
		hub.Receive(cmd, ack, answer)
		return nil, nil
	})
}
