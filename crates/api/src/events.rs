//! Reliable events a game sends: to one seat or to every seated client.
//!
//! The game writes an event's bytes (its own format); after the step the runtime puts each
//! client's events of the tick, in order, into one reliable message on its link, so they
//! ride in that tick's packet ahead of the snapshot (a burst of events fills a link's queue
//! by one message, not by one per event). A seat's events arrive in
//! the order they were queued, once, whatever the loss. An event to a seat without a client
//! is dropped; one whose link's send queue is full is dropped and counted.

/// Who an event goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Only this seat's client.
    Seat(crate::Seat),
    /// Every seated client.
    All,
}

/// One tick's outgoing events, back to back in one buffer made with the match.
#[derive(Debug, Default)]
pub struct Events {
    bytes: Vec<u8>,
    /// Each event's target and the end of its bytes.
    ends: Vec<(Target, usize)>,
}

impl Events {
    /// Room for `events` events of `bytes_each` bytes a tick before the buffer grows.
    pub fn with_capacity(events: usize, bytes_each: usize) -> Events {
        Events {
            bytes: Vec::with_capacity(events * bytes_each),
            ends: Vec::with_capacity(events),
        }
    }

    /// Queues `bytes` for `to`.
    pub fn send(&mut self, to: Target, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
        self.ends.push((to, self.bytes.len()));
    }

    /// Queues the event `write` appends to the buffer it is given, for `to`: no copy
    /// through a scratch buffer. `write` may only append: if it shortens the buffer, the
    /// events it cut into are dropped with it (never a panic later).
    pub fn write(&mut self, to: Target, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.bytes.len();
        write(&mut self.bytes);
        let len = self.bytes.len();
        if len < start {
            while self.ends.last().is_some_and(|&(_, end)| end > len) {
                self.ends.pop();
            }
            let kept = self.ends.last().map_or(0, |&(_, end)| end);
            self.bytes.truncate(kept);
            return;
        }
        self.ends.push((to, len));
    }

    /// Events queued.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when none is queued.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Each event with its target, in the order queued.
    pub fn iter(&self) -> impl Iterator<Item = (Target, &[u8])> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&(_, end)| end));
        (self.ends.iter())
            .zip(starts)
            .map(|(&(to, end), start)| (to, &self.bytes[start..end]))
    }

    /// The `i`th event queued, with its target.
    pub fn get(&self, i: usize) -> Option<(Target, &[u8])> {
        let &(to, end) = self.ends.get(i)?;
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p].1);
        Some((to, &self.bytes[start..end]))
    }

    /// Forgets every event, keeping the memory.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Seat;

    #[test]
    fn events_come_back_in_order_with_their_targets() {
        let mut e = Events::with_capacity(4, 8);
        e.send(Target::All, b"round 2");
        e.write(Target::Seat(Seat(3)), |out| {
            out.extend_from_slice(&[1, 2, 3])
        });
        e.send(Target::Seat(Seat(0)), b"");
        let got: Vec<(Target, Vec<u8>)> = e.iter().map(|(t, b)| (t, b.to_vec())).collect();
        assert_eq!(
            got,
            vec![
                (Target::All, b"round 2".to_vec()),
                (Target::Seat(Seat(3)), vec![1, 2, 3]),
                (Target::Seat(Seat(0)), vec![]),
            ]
        );
        for (i, want) in got.iter().enumerate() {
            let (to, bytes) = e.get(i).expect("queued");
            assert_eq!((to, bytes), (want.0, &want.1[..]));
        }
        assert_eq!(e.get(got.len()), None);
        e.clear();
        assert!(e.is_empty() && e.iter().next().is_none());
    }

    #[test]
    fn a_writer_that_cuts_the_buffer_loses_what_it_cut_and_nothing_panics() {
        let mut e = Events::with_capacity(4, 8);
        e.send(Target::All, b"abc");
        e.send(Target::All, b"defg");
        e.write(Target::All, |out| out.truncate(5));
        let got: Vec<&[u8]> = e.iter().map(|(_, b)| b).collect();
        assert_eq!(got, vec![&b"abc"[..]]);
        e.send(Target::All, b"h");
        assert_eq!(
            e.iter().map(|(_, b)| b.len()).collect::<Vec<_>>(),
            vec![3, 1]
        );
    }
}
