package nodebus

import (
	"context"
	"errors"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"
)

// memPubSub is the Pub/Sub of the bus in one process (NewBus). It keeps
// what the bus on NATS core keeps (natsSubscriber): each subscriber is
// handed the messages of its topic in the order they were published, one
// at a time, the next once the one before was acknowledged; a publisher
// never waits for a subscriber; a message nobody subscribed to is dropped.
//
// The exchange relies on that order: a Client takes the first reply to a
// command, and a command sent again after it was answered is answered
// after that answer (Hub.Receive), a copy's from the answer its node kept
// or, with none kept, 503 "copy's answer lost between relay nodes".
// Watermill's GoChannel hands each message on from a goroutine of its own
// and keeps no order (its own conformance tests declare none): on a busy
// machine that 503 overtook the copy's answer, and the copy was recorded
// as lost though its listener had answered.
type memPubSub struct {
	mu      sync.Mutex
	closed  bool
	topics  map[string][]*memSubscription
	closing chan struct{}
	running sync.WaitGroup // one per subscription
}

// memSubscription is one subscriber's messages not handed on yet.
type memSubscription struct {
	mu     sync.Mutex
	queue  []*message.Message
	queued chan struct{} // capacity 1: the queue grew
}

func newMemPubSub() *memPubSub {
	return &memPubSub{topics: map[string][]*memSubscription{}, closing: make(chan struct{})}
}

// Publish queues msgs for every subscriber of topic, in order, without
// waiting for any.
func (p *memPubSub) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("publish: bus closed")
	}
	for _, s := range p.topics[topic] {
		s.mu.Lock()
		for _, m := range msgs {
			s.queue = append(s.queue, m.Copy()) // each subscriber acknowledges its own
		}
		s.mu.Unlock()
		select {
		case s.queued <- struct{}{}:
		default: // already told
		}
	}
	return nil
}

// Subscribe hands on topic's messages published from now on, in order,
// each once the one before was acknowledged or refused (as on NATS core,
// nothing is sent again). The channel closes once ctx is done or the
// Pub/Sub closed.
func (p *memPubSub) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("subscribe: bus closed")
	}
	s := &memSubscription{queued: make(chan struct{}, 1)}
	p.topics[topic] = append(p.topics[topic], s)
	out := make(chan *message.Message)
	p.running.Add(1)
	go func() {
		defer p.running.Done()
		defer close(out)
		defer p.unsubscribe(topic, s)
		for {
			m := s.next()
			if m == nil {
				select {
				case <-s.queued:
					continue
				case <-ctx.Done():
					return
				case <-p.closing:
					return
				}
			}
			m.SetContext(ctx)
			select {
			case out <- m:
			case <-ctx.Done():
				return
			case <-p.closing:
				return
			}
			select {
			case <-m.Acked():
			case <-m.Nacked():
			case <-ctx.Done():
				return
			case <-p.closing:
				return
			}
		}
	}()
	return out, nil
}

// next takes the oldest message queued, or nil.
func (s *memSubscription) next() *message.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return nil
	}
	m := s.queue[0]
	s.queue[0] = nil
	s.queue = s.queue[1:]
	return m
}

func (p *memPubSub) unsubscribe(topic string, s *memSubscription) {
	p.mu.Lock()
	defer p.mu.Unlock()
	subs := p.topics[topic]
	for i, sub := range subs {
		if sub == s {
			p.topics[topic] = append(subs[:i:i], subs[i+1:]...)
			break
		}
	}
	if len(p.topics[topic]) == 0 {
		delete(p.topics, topic)
	}
}

// Close ends every subscription and waits until none hands on a message.
func (p *memPubSub) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.closing)
	p.mu.Unlock()
	p.running.Wait()
	return nil
}
