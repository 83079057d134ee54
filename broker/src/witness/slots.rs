//! How many witness runs may go at once: the slots every intake queues for before its witness
//! runs, so N runs submitting at once do not start N test suites together.

/// How many witness runs may go at once (`broker.toml`'s `witness_concurrency`): a counting
/// semaphore. Each witness runs a project's whole test suite, several times; N runs submitting
/// at once would otherwise start N suites together and oversubscribe the machine, so the ones
/// past the limit queue here, in no particular order, until a run finishes.
#[derive(Debug)]
pub struct WitnessSlots {
    limit: usize,
    state: std::sync::Mutex<SlotCounts>,
    freed: std::sync::Condvar,
}

/// Runs holding a slot and runs waiting for one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotCounts {
    /// Witness runs going now.
    pub running: usize,
    /// Witness runs queued for a slot.
    pub waiting: usize,
}

/// A held slot; dropping it frees the slot.
#[derive(Debug)]
pub struct WitnessSlot<'a> {
    slots: &'a WitnessSlots,
}

impl WitnessSlots {
    /// At most `limit` witness runs at once (at least one).
    pub fn new(limit: usize) -> Self {
        WitnessSlots {
            limit: limit.max(1),
            state: std::sync::Mutex::new(SlotCounts::default()),
            freed: std::sync::Condvar::new(),
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, SlotCounts> {
        // Counts are updated in one step each; a poisoned lock still holds consistent ones.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wait for a free slot and take it.
    pub fn acquire(&self) -> WitnessSlot<'_> {
        let mut counts = self.counts();
        counts.waiting += 1;
        while counts.running >= self.limit {
            counts = self
                .freed
                .wait(counts)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        counts.waiting -= 1;
        counts.running += 1;
        WitnessSlot { slots: self }
    }

    /// A free slot, taken, if one is free and no run waits for one: a witness that holds a slot
    /// runs two of its steps at once with it, never ahead of a run still queued.
    pub fn try_acquire(&self) -> Option<WitnessSlot<'_>> {
        let mut counts = self.counts();
        if counts.running >= self.limit || counts.waiting > 0 {
            return None;
        }
        counts.running += 1;
        Some(WitnessSlot { slots: self })
    }

    /// How many runs hold a slot and how many wait, now.
    pub fn counts_now(&self) -> SlotCounts {
        *self.counts()
    }

    /// The configured limit.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl Drop for WitnessSlot<'_> {
    fn drop(&mut self) {
        let mut counts = self.slots.counts();
        counts.running = counts.running.saturating_sub(1);
        drop(counts);
        self.slots.freed.notify_one();
    }
}

#[cfg(test)]
mod slot_tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// Six runs against a limit of two: two run, four queue, and no more than two are ever
    /// inside at once. Observed by counting, never by timing.
    #[test]
    fn runs_past_the_limit_queue_until_a_slot_is_freed() {
        let slots = WitnessSlots::new(2);
        let inside = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let open = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    let _slot = slots.acquire();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    while !open.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                    inside.fetch_sub(1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                });
            }
            // Every run has arrived: two hold a slot, four wait for one.
            while slots.counts_now()
                != (SlotCounts {
                    running: 2,
                    waiting: 4,
                })
            {
                std::thread::yield_now();
            }
            assert_eq!(inside.load(Ordering::SeqCst), 2);
            open.store(true, Ordering::SeqCst);
        });
        assert_eq!(done.load(Ordering::SeqCst), 6);
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(slots.counts_now(), SlotCounts::default());
    }

    #[test]
    fn a_limit_of_zero_is_one() {
        assert_eq!(WitnessSlots::new(0).limit(), 1);
    }
}
