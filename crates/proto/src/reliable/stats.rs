//! What an endpoint measured about its link: round trip, jitter, loss and counters.

use std::time::Duration;

/// Weight of one judged packet in the loss estimate (an exponential moving average over
/// roughly the last 32 packets: a quarter of a second at 128 Hz).
const LOSS_SMOOTHING: f32 = 1.0 / 32.0;

/// Round trip, jitter, loss and counters of one [`Endpoint`](super::Endpoint).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkStats {
    /// Smoothed round-trip time: from writing a packet to reading the first ack of it,
    /// which includes the peer's wait for its next packet (RFC 6298's SRTT).
    pub rtt: Duration,
    /// Smoothed mean deviation of the round trip (RFC 6298's RTTVAR).
    pub jitter: Duration,
    /// Fraction of our packets presumed lost, 0.0..=1.0, smoothed over the last few dozen.
    /// A packet is judged once no future ack can cover it: acked, or lost.
    pub loss: f32,
    /// Packets written.
    pub packets_sent: u64,
    /// Packets accepted from the peer.
    pub packets_received: u64,
    /// Our packets the peer acknowledged.
    pub packets_acked: u64,
    /// Our packets judged lost (unacknowledged once out of the ack range).
    pub packets_lost: u64,
    /// Packets from the peer dropped because they arrived before.
    pub packets_duplicate: u64,
    /// Packets from the peer dropped because they were older than the packet history.
    pub packets_stale: u64,
    /// Packets from the peer dropped unacknowledged because received messages had not been
    /// polled yet and left no room.
    pub packets_backpressure: u64,
    /// Bytes of packets written.
    pub bytes_sent: u64,
    /// Bytes of packets accepted.
    pub bytes_received: u64,
    /// Reliable messages queued by the caller.
    pub messages_queued: u64,
    /// Reliable messages acknowledged in full and freed from the send queue.
    pub messages_acked: u64,
    /// Reliable messages handed to the caller by `poll_reliable`.
    pub messages_delivered: u64,
    /// Reliable sections (messages or fragments) written again after no ack came.
    pub sections_resent: u64,
    /// Acknowledged unreliable tags discarded because the caller did not poll them.
    pub acked_tags_dropped: u64,
}

impl LinkStats {
    pub(crate) fn new(initial_rtt: Duration) -> Self {
        LinkStats {
            rtt: initial_rtt,
            jitter: initial_rtt / 2,
            ..LinkStats::default()
        }
    }

    /// Folds one round-trip sample into `rtt` and `jitter` (RFC 6298, section 2).
    pub(crate) fn sample_rtt(&mut self, sample: Duration, first: bool) {
        if first {
            self.rtt = sample;
            self.jitter = sample / 2;
            return;
        }
        let deviation = sample.abs_diff(self.rtt);
        self.jitter = (self.jitter * 3 + deviation) / 4;
        self.rtt = (self.rtt * 7 + sample) / 8;
    }

    /// Folds the fate of one of our packets into `loss`.
    pub(crate) fn judge(&mut self, lost: bool) {
        let sample = if lost { 1.0 } else { 0.0 };
        self.loss += (sample - self.loss) * LOSS_SMOOTHING;
        if lost {
            self.packets_lost += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_converges_on_a_steady_round_trip() {
        let mut s = LinkStats::new(Duration::from_millis(100));
        s.sample_rtt(Duration::from_millis(40), true);
        assert_eq!(s.rtt, Duration::from_millis(40));
        for _ in 0..100 {
            s.sample_rtt(Duration::from_millis(60), false);
        }
        let ms = s.rtt.as_secs_f64() * 1000.0;
        assert!((59.9..=60.0).contains(&ms), "{ms}");
        assert!(s.jitter < Duration::from_millis(1), "{:?}", s.jitter);
    }

    #[test]
    fn jitter_tracks_alternating_samples() {
        let mut s = LinkStats::new(Duration::from_millis(100));
        s.sample_rtt(Duration::from_millis(50), true);
        for i in 0..200u32 {
            let ms = if i.is_multiple_of(2) { 40 } else { 60 };
            s.sample_rtt(Duration::from_millis(ms), false);
        }
        let rtt = s.rtt.as_secs_f64() * 1000.0;
        let jitter = s.jitter.as_secs_f64() * 1000.0;
        assert!((48.0..=52.0).contains(&rtt), "{rtt}");
        assert!((8.0..=12.0).contains(&jitter), "{jitter}");
    }

    #[test]
    fn loss_estimate_follows_the_fraction_lost() {
        let mut s = LinkStats::new(Duration::from_millis(100));
        for i in 0..1000u32 {
            s.judge(i.is_multiple_of(5));
        }
        assert!((0.15..=0.25).contains(&s.loss), "{}", s.loss);
        assert_eq!(s.packets_lost, 200);
        for _ in 0..200 {
            s.judge(false);
        }
        assert!(s.loss < 0.01, "{}", s.loss);
    }
}
