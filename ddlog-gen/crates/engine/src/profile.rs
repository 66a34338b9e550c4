//! Where a commit's time goes, by relation: `LOOM_ENGINE_PROFILE=1` makes every worker
//! print, after each commit that took at least `LOOM_ENGINE_PROFILE_MS` (default 100) ms,
//! the self time of the operators that compute each derived relation (the rule bodies,
//! joins, arrangements and `group_by`s of its rules), to standard error.
//!
//! It listens to timely's own scheduling log: an operator's self time is the time between
//! its start and stop events less that of the operators scheduled inside it (a scope's
//! children). Operators are labelled by the relation whose rules were being built when
//! they were created; the rest of an epoch (progress tracking, parking) shows as
//! "(outside operators)".
//!
//! With it, the updates every arrangement holds after the commit, summed by label, from
//! differential's own log (batches made, merged and dropped): where the engine's memory is.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::rc::Rc;
use std::time::{Duration, Instant};

use differential_dataflow::logging::{DifferentialEvent, DifferentialEventBuilder};
use timely::logging::{StartStop, TimelyEvent, TimelyEventBuilder};
use timely::worker::Worker;

/// Labels of operator identifiers: `(first identifier, label)`, ascending. An operator
/// belongs to the last entry whose first identifier is at most its own.
#[derive(Clone, Debug, Default)]
pub struct Labels(Vec<(usize, String)>);

impl Labels {
    /// Operators created from now on belong to `label`.
    pub fn mark(&mut self, next_identifier: usize, label: &str) {
        self.0.push((next_identifier, label.to_owned()));
    }

    fn of(&self, id: usize) -> &str {
        let i = self.0.partition_point(|(first, _)| *first <= id);
        i.checked_sub(1)
            .map_or("(dataflow)", |i| self.0[i].1.as_str())
    }
}

/// Self time per operator identifier, collected from the "timely" log of one worker.
#[derive(Default)]
struct Times {
    /// Operators started and not yet stopped: (id, start, time of children so far).
    stack: Vec<(usize, Duration, Duration)>,
    own: HashMap<usize, Duration>,
    /// Updates held by each arranging operator's trace.
    held: HashMap<usize, i64>,
}

/// A worker's profiler; `None` unless `LOOM_ENGINE_PROFILE` is set.
pub struct Profiler {
    times: Rc<RefCell<Times>>,
    threshold: Duration,
    began: Instant,
}

impl Profiler {
    /// Register with `worker`'s log before its dataflow is built (operators pick up the
    /// logger when they are created).
    pub fn install(worker: &Worker) -> Option<Profiler> {
        std::env::var_os("LOOM_ENGINE_PROFILE")?;
        let ms = std::env::var("LOOM_ENGINE_PROFILE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100);
        let times = Rc::new(RefCell::new(Times::default()));
        let sink = times.clone();
        let held = times.clone();
        worker
            .log_register()?
            .insert::<DifferentialEventBuilder, _>("differential/arrange", move |_, data| {
                let Some(events) = data else { return };
                let mut t = held.borrow_mut();
                for (_, event) in events.iter() {
                    let (op, delta) = match event {
                        DifferentialEvent::Batch(b) => (b.operator, b.length as i64),
                        DifferentialEvent::Drop(d) => (d.operator, -(d.length as i64)),
                        DifferentialEvent::Merge(m) => match m.complete {
                            Some(n) => (m.operator, n as i64 - (m.length1 + m.length2) as i64),
                            None => continue,
                        },
                        _ => continue,
                    };
                    *t.held.entry(op).or_default() += delta;
                }
            });
        worker
            .log_register()?
            .insert::<TimelyEventBuilder, _>("timely", move |_, data| {
                let Some(events) = data else { return };
                let mut t = sink.borrow_mut();
                for (at, event) in events.iter() {
                    if let TimelyEvent::Schedule(s) = event {
                        match s.start_stop {
                            StartStop::Start => t.stack.push((s.id, *at, Duration::ZERO)),
                            StartStop::Stop => {
                                let Some((id, start, children)) = t.stack.pop() else {
                                    continue;
                                };
                                let total = at.saturating_sub(start);
                                *t.own.entry(id).or_default() += total.saturating_sub(children);
                                if let Some(parent) = t.stack.last_mut() {
                                    parent.2 += total;
                                }
                            }
                        }
                    }
                }
            });
        Some(Profiler {
            times,
            threshold: Duration::from_millis(ms),
            began: Instant::now(),
        })
    }

    /// A commit starts on `worker`: events of earlier commits still buffered in its log
    /// are delivered first, so they are not counted in this one.
    pub fn begin(&mut self, worker: &Worker) {
        flush_log(worker);
        self.times.borrow_mut().own.clear();
        self.began = Instant::now();
    }

    /// A commit ended on worker `index`: print its profile if it was slow enough.
    pub fn report(&self, worker: &Worker, labels: &Labels, details: &Labels, index: usize) {
        let elapsed = self.began.elapsed();
        if elapsed < self.threshold {
            return;
        }
        flush_log(worker); // the log is buffered: deliver this commit's events
        let times = self.times.borrow();
        let mut by_label: HashMap<&str, Duration> = HashMap::new();
        for (id, d) in &times.own {
            *by_label.entry(labels.of(*id)).or_default() += *d;
        }
        let inside: Duration = by_label.values().sum();
        let mut rows: Vec<(&str, Duration)> = by_label.into_iter().collect();
        rows.push(("(outside operators)", elapsed.saturating_sub(inside)));
        rows.sort_by_key(|r| std::cmp::Reverse(r.1));
        let mut text = format!(
            "loom-engine profile: worker {index}, commit {:.1} ms\n",
            elapsed.as_secs_f64() * 1e3
        );
        for (label, d) in rows.iter().take(25) {
            let _ = writeln!(text, "  {:>10.1} ms  {label}", d.as_secs_f64() * 1e3);
        }
        let held = held_by(&times.held, labels);
        let total: i64 = held.iter().map(|r| r.1).sum();
        let _ = writeln!(text, "  arrangements: {total} updates held");
        for (label, n) in held.iter().take(25) {
            let _ = writeln!(text, "  {n:>12}  {label}");
        }
        let _ = writeln!(
            text,
            "  the largest arrangements (a relation's, or a rule's join):"
        );
        for (label, n) in held_by(&times.held, details).iter().take(25) {
            let _ = writeln!(text, "  {n:>12}  {label}");
        }
        eprint!("{text}");
    }
}

/// The updates held by each operator (`held`), summed by label, largest first (none empty).
fn held_by<'a>(held: &HashMap<usize, i64>, labels: &'a Labels) -> Vec<(&'a str, i64)> {
    let mut sums: HashMap<&str, i64> = HashMap::new();
    for (id, n) in held {
        *sums.entry(labels.of(*id)).or_default() += *n;
    }
    let mut sums: Vec<(&str, i64)> = sums.into_iter().filter(|r| r.1 != 0).collect();
    sums.sort_by_key(|r| std::cmp::Reverse(r.1));
    sums
}

/// Deliver the events `worker`'s log has buffered to its loggers.
fn flush_log(worker: &Worker) {
    if let Some(mut registry) = worker.log_register() {
        registry.flush();
    }
}
