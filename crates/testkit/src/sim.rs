//! [`NetSim`]: datagrams between addresses on virtual time, with seeded impairments.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::rng::SimRng;

/// How one direction of a link treats each datagram.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConditions {
    /// One-way delay every datagram takes.
    pub latency: Duration,
    /// Extra delay drawn uniformly from `0..=jitter` per datagram; datagrams sent close
    /// together may swap.
    pub jitter: Duration,
    /// Probability (0.0..=1.0) that a datagram is dropped.
    pub loss_probability: f64,
    /// Probability that a datagram that was not dropped arrives twice; the copy draws its
    /// own delay.
    pub duplicate_probability: f64,
    /// Probability that a datagram is held back a further `reorder_delay`, arriving after
    /// datagrams sent later.
    pub reorder_probability: f64,
    /// Extra delay of a held-back datagram.
    pub reorder_delay: Duration,
}

impl LinkConditions {
    /// A link that only delays, by exactly `latency`.
    pub fn ideal(latency: Duration) -> Self {
        LinkConditions {
            latency,
            jitter: Duration::ZERO,
            loss_probability: 0.0,
            duplicate_probability: 0.0,
            reorder_probability: 0.0,
            reorder_delay: Duration::ZERO,
        }
    }

    /// A link that drops everything.
    pub fn dead() -> Self {
        LinkConditions {
            loss_probability: 1.0,
            ..LinkConditions::ideal(Duration::ZERO)
        }
    }
}

/// A datagram delivered by [`NetSim`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// The sender's address.
    pub from: SocketAddr,
    /// The receiver's address.
    pub to: SocketAddr,
    /// The bytes, as sent.
    pub bytes: Vec<u8>,
    /// When it was sent.
    pub sent_at: Instant,
    /// When it became due.
    pub deliver_at: Instant,
}

/// What the simulator did to the datagrams sent so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Datagrams handed to [`NetSim::send`].
    pub sent: u64,
    /// Dropped.
    pub lost: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Copies held back by `reorder_delay`.
    pub reordered: u64,
    /// Copies taken by the test.
    pub delivered: u64,
}

/// A copy in flight, ordered by due time and then by send order, so that ties resolve the
/// same way on every run.
#[derive(Debug)]
struct InFlight {
    deliver_at: Instant,
    serial: u64,
    datagram: Datagram,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for InFlight {}

impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InFlight {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.deliver_at, self.serial).cmp(&(other.deliver_at, other.serial))
    }
}

/// A seeded network of datagrams between `SocketAddr`s, on the test's virtual time.
///
/// [`NetSim::send`] decides each datagram's fate at once (dropped, delayed, duplicated,
/// held back) from the seeded generator; [`NetSim::poll_due`] hands out copies whose time
/// has come, earliest first. Same seed, same conditions and same sends: same deliveries.
pub struct NetSim {
    rng: SimRng,
    default_link: LinkConditions,
    /// Per-direction overrides, searched in order (a short list, and no hash order).
    links: Vec<(SocketAddr, SocketAddr, LinkConditions)>,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    next_serial: u64,
    stats: SimStats,
}

impl NetSim {
    /// A network where every direction has `conditions` until [`NetSim::set_link`].
    pub fn new(seed: u64, conditions: LinkConditions) -> Self {
        NetSim {
            rng: SimRng::new(seed),
            default_link: conditions,
            links: Vec::new(),
            in_flight: BinaryHeap::new(),
            next_serial: 0,
            stats: SimStats::default(),
        }
    }

    /// Sets the conditions of datagrams from `from` to `to` (one direction only).
    pub fn set_link(&mut self, from: SocketAddr, to: SocketAddr, conditions: LinkConditions) {
        match self
            .links
            .iter_mut()
            .find(|(f, t, _)| *f == from && *t == to)
        {
            Some(link) => link.2 = conditions,
            None => self.links.push((from, to, conditions)),
        }
    }

    /// The conditions datagrams from `from` to `to` meet.
    pub fn link(&self, from: SocketAddr, to: SocketAddr) -> LinkConditions {
        self.links
            .iter()
            .find(|(f, t, _)| *f == from && *t == to)
            .map_or(self.default_link, |l| l.2)
    }

    /// Sends `bytes` from `from` to `to` at `now`; they arrive zero, one or two times.
    pub fn send(&mut self, now: Instant, from: SocketAddr, to: SocketAddr, bytes: &[u8]) {
        let link = self.link(from, to);
        self.stats.sent += 1;
        // Draw in a fixed order whatever the outcome, so that one datagram's fate does not
        // shift the draws of the next.
        let lost = self.rng.chance(link.loss_probability);
        let duplicated = self.rng.chance(link.duplicate_probability);
        let delays = [self.draw_delay(&link), self.draw_delay(&link)];
        if lost {
            self.stats.lost += 1;
            return;
        }
        let copies = if duplicated {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for (delay, reordered) in &delays[..copies] {
            if *reordered {
                self.stats.reordered += 1;
            }
            let deliver_at = now + *delay;
            self.in_flight.push(Reverse(InFlight {
                deliver_at,
                serial: self.next_serial,
                datagram: Datagram {
                    from,
                    to,
                    bytes: bytes.to_vec(),
                    sent_at: now,
                    deliver_at,
                },
            }));
            self.next_serial += 1;
        }
    }

    fn draw_delay(&mut self, link: &LinkConditions) -> (Duration, bool) {
        let jitter = self.rng.duration_up_to(link.jitter);
        let reordered = self.rng.chance(link.reorder_probability);
        let extra = if reordered {
            link.reorder_delay
        } else {
            Duration::ZERO
        };
        (link.latency + jitter + extra, reordered)
    }

    /// The earliest datagram due at or before `now`, if any.
    pub fn poll_due(&mut self, now: Instant) -> Option<Datagram> {
        if self.in_flight.peek()?.0.deliver_at > now {
            return None;
        }
        let Reverse(next) = self.in_flight.pop()?;
        self.stats.delivered += 1;
        Some(next.datagram)
    }

    /// Every datagram due at or before `now`, earliest first.
    pub fn take_due(&mut self, now: Instant) -> Vec<Datagram> {
        std::iter::from_fn(|| self.poll_due(now)).collect()
    }

    /// When the next datagram in flight becomes due.
    pub fn next_due(&self) -> Option<Instant> {
        self.in_flight.peek().map(|f| f.0.deliver_at)
    }

    /// Copies in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// What happened to the datagrams so far.
    pub fn stats(&self) -> &SimStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    fn rough() -> LinkConditions {
        LinkConditions {
            latency: Duration::from_millis(30),
            jitter: Duration::from_millis(10),
            loss_probability: 0.2,
            duplicate_probability: 0.1,
            reorder_probability: 0.1,
            reorder_delay: Duration::from_millis(20),
        }
    }

    /// Runs a fixed pattern of sends and returns every delivery as (offset, from, to, bytes).
    fn run(seed: u64, origin: Instant) -> Vec<(Duration, SocketAddr, SocketAddr, Vec<u8>)> {
        let mut sim = NetSim::new(seed, rough());
        sim.set_link(
            addr(2),
            addr(1),
            LinkConditions::ideal(Duration::from_millis(5)),
        );
        let tick = Duration::from_nanos(7_812_500);
        let mut log = Vec::new();
        for t in 0..500u32 {
            let now = origin + tick * t;
            sim.send(now, addr(1), addr(2), &t.to_le_bytes());
            sim.send(now, addr(2), addr(1), &(t | 1 << 31).to_le_bytes());
            for d in sim.take_due(now) {
                log.push((d.deliver_at - origin, d.from, d.to, d.bytes));
            }
        }
        log
    }

    #[test]
    fn same_seed_and_sends_give_the_same_deliveries_and_another_seed_does_not() {
        let origin = Instant::now();
        let a = run(7, origin);
        let b = run(7, origin);
        assert!(a.len() > 700, "{}", a.len());
        assert_eq!(a, b);
        let later = origin + Duration::from_secs(3600);
        assert_eq!(run(7, later), a, "the origin does not matter, only offsets");
        assert_ne!(run(8, origin), a);
    }

    #[test]
    fn impairments_happen_at_their_rates() {
        let origin = Instant::now();
        let mut sim = NetSim::new(1, rough());
        for t in 0..10_000u32 {
            sim.send(origin, addr(1), addr(2), &t.to_le_bytes());
        }
        let s = *sim.stats();
        assert!((1800..=2200).contains(&s.lost), "{s:?}");
        assert!((650..=950).contains(&s.duplicated), "{s:?}");
        assert_eq!(sim.in_flight() as u64, s.sent - s.lost + s.duplicated);
        let all = sim.take_due(origin + Duration::from_secs(1));
        assert_eq!(all.len() as u64, s.sent - s.lost + s.duplicated);
        for d in &all {
            let delay = d.deliver_at - d.sent_at;
            assert!(delay >= Duration::from_millis(30) && delay <= Duration::from_millis(60));
        }
        assert!(
            all.windows(2).all(|w| w[0].deliver_at <= w[1].deliver_at),
            "earliest first"
        );
        let number =
            |d: &Datagram| u32::from_le_bytes([d.bytes[0], d.bytes[1], d.bytes[2], d.bytes[3]]);
        let swapped = all
            .windows(2)
            .filter(|w| number(&w[0]) > number(&w[1]))
            .count();
        assert!(swapped > 0, "jitter and hold-backs reorder");
    }

    #[test]
    fn nothing_arrives_early_and_dead_links_drop_everything() {
        let origin = Instant::now();
        let mut sim = NetSim::new(3, LinkConditions::ideal(Duration::from_millis(10)));
        sim.set_link(addr(2), addr(1), LinkConditions::dead());
        sim.send(origin, addr(1), addr(2), b"a");
        sim.send(origin, addr(2), addr(1), b"b");
        assert_eq!(sim.poll_due(origin + Duration::from_millis(9)), None);
        assert_eq!(sim.next_due(), Some(origin + Duration::from_millis(10)));
        let got = sim.take_due(origin + Duration::from_millis(10));
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].from, got[0].to, &got[0].bytes[..]),
            (addr(1), addr(2), &b"a"[..])
        );
        assert_eq!(sim.stats().lost, 1);
        assert_eq!(sim.in_flight(), 0);
    }
}
