//! Timely workers on their own threads, driven over channels.
//!
//! Each commit sends every worker the epoch's updates (all to worker 0), then unparks it.
//! A worker feeds its inputs, advances and flushes *every* input session to the next
//! epoch, steps until the probe passes the epoch, and sends back the changes it captured.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};

use rulec::ir::{Program, RelId};
use rulec::value::Row;
use timely::communication::WorkerGuards;
use timely::dataflow::operators::probe::Handle as ProbeHandle;

use crate::dataflow::{self, Captured};
use crate::profile::Profiler;
use crate::Error;

/// One commit's changes, by relation, not yet consolidated.
pub type Changes = Vec<(RelId, Row, isize)>;

enum Cmd {
    /// Apply these input updates as epoch `.0`.
    Txn(u64, Changes),
    /// Leave the loop.
    Stop,
}

/// Handle on the running workers.
pub struct Workers {
    txs: Vec<Sender<Cmd>>,
    rx: Receiver<Result<Changes, String>>,
    guards: Option<WorkerGuards<()>>,
    epoch: u64,
}

impl Workers {
    /// Start `n` workers, each building the dataflow for `prog`.
    /// Only the relations `capture` marks send their changes back.
    pub fn start(
        prog: &Arc<Program>,
        n: usize,
        errors: &Arc<AtomicU64>,
        capture: &[bool],
    ) -> Result<Workers, Error> {
        let n = n.max(1);
        let mut txs = Vec::new();
        let mut rxs = Vec::new();
        for _ in 0..n {
            let (tx, rx) = channel::<Cmd>();
            txs.push(tx);
            rxs.push(Some(rx));
        }
        let rxs = Arc::new(Mutex::new(rxs));
        let (resp_tx, resp_rx) = channel::<Result<Changes, String>>();
        let prog = prog.clone();
        let errors = errors.clone();
        let capture = capture.to_vec();
        let guards = timely::execute(timely::Config::process(n), move |worker| {
            let index = worker.index();
            let rx = rxs
                .lock()
                .ok()
                .and_then(|mut v| v.get_mut(index).and_then(Option::take));
            let Some(rx) = rx else {
                return;
            };
            let mut profiler = Profiler::install(worker);
            let probe = ProbeHandle::new();
            let captured: Captured = Captured::default();
            let mut built = worker.dataflow::<u64, _, _>(|scope| {
                dataflow::build(scope, &prog, &errors, &probe, &captured, &capture)
            });
            if index == 0 {
                built.unit.insert(Vec::new());
                if profiler.is_some() {
                    eprintln!(
                        "loom-engine profile: {} operators",
                        worker.peek_identifier()
                    );
                }
            }
            let mut inputs: HashMap<RelId, _> = std::mem::take(&mut built.inputs);
            loop {
                match rx.try_recv() {
                    Err(TryRecvError::Empty) => {
                        worker.step_or_park(None);
                    }
                    Err(TryRecvError::Disconnected) | Ok(Cmd::Stop) => break,
                    Ok(Cmd::Txn(epoch, updates)) => {
                        if let Some(p) = profiler.as_mut() {
                            p.begin(worker);
                        }
                        for (rel, row, d) in updates {
                            if let Some(input) = inputs.get_mut(&rel) {
                                input.update(row, d);
                            }
                        }
                        for input in inputs.values_mut() {
                            input.advance_to(epoch + 1);
                            input.flush();
                        }
                        built.unit.advance_to(epoch + 1);
                        built.unit.flush();
                        // Park (after timely's short idle spin) while the other workers
                        // finish: spinning took a core from the processes the controller
                        // shares its machine with (it showed in small commits' tail
                        // latency, not in their median).
                        worker.step_or_park_while(None, || probe.less_than(&(epoch + 1)));
                        if let Some(p) = profiler.as_ref() {
                            p.report(worker, &built.labels, &built.details, index);
                        }
                        let out = std::mem::take(&mut *captured.borrow_mut());
                        if resp_tx.send(Ok(out)).is_err() {
                            break;
                        }
                    }
                }
            }
        })
        .map_err(Error::WorkerGone)?;
        Ok(Workers {
            txs,
            rx: resp_rx,
            guards: Some(guards),
            epoch: 0,
        })
    }

    /// Start one epoch with `updates`; [`Workers::receive`] waits for its results.
    pub fn send(&mut self, updates: Changes) -> Result<(), Error> {
        let epoch = self.epoch;
        let mut updates = Some(updates);
        for (i, tx) in self.txs.iter().enumerate() {
            let ups = if i == 0 {
                updates.take().unwrap_or_default()
            } else {
                Vec::new()
            };
            tx.send(Cmd::Txn(epoch, ups))
                .map_err(|_| Error::WorkerGone("worker exited".into()))?;
            self.unpark(i);
        }
        Ok(())
    }

    /// Wait for the epoch started by [`Workers::send`]; returns every derived relation's
    /// changes (not consolidated).
    pub fn receive(&mut self) -> Result<Changes, Error> {
        let mut all = Vec::new();
        for _ in 0..self.txs.len() {
            match self.rx.recv() {
                Ok(Ok(changes)) => {
                    if all.is_empty() {
                        all = changes;
                    } else {
                        all.extend(changes);
                    }
                }
                Ok(Err(e)) => return Err(Error::WorkerGone(e)),
                Err(_) => return Err(Error::WorkerGone("worker exited (panic?)".into())),
            }
        }
        self.epoch += 1;
        Ok(all)
    }

    fn unpark(&self, i: usize) {
        if let Some(g) = self.guards.as_ref().and_then(|g| g.guards().get(i)) {
            g.thread().unpark();
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for (i, tx) in self.txs.iter().enumerate() {
            let _ = tx.send(Cmd::Stop);
            self.unpark(i);
        }
        // Join the worker threads; a worker that panicked was already reported as
        // `WorkerGone` and must not turn this drop into a panic.
        if let Some(guards) = self.guards.take() {
            let _ = guards.join();
        }
    }
}
