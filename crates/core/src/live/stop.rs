//! A turn's stop signal: set by whoever may stop the turn (its client going away, a WebSocket
//! `cancel` frame, `POST …/chat/stop`), read by the turn at every streamed piece and awaited
//! beside the model call, so a stop ends the call at once even while the model is silent.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Poll, Waker};

/// The stop signal of one turn; clones share it. Never set by default.
#[derive(Clone, Default)]
pub struct Stop(Rc<Signal>);

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stop({})", self.is_stopped())
    }
}

#[derive(Default)]
struct Signal {
    set: Cell<bool>,
    /// The tasks waiting on [`until_stopped`], woken when the signal is set.
    waiting: RefCell<Vec<Waker>>,
}

impl Stop {
    /// Stops the turn (idempotent); wakes a turn waiting on its model.
    pub fn stop(&self) {
        self.0.set.set(true);
        let waiting = std::mem::take(&mut *self.0.waiting.borrow_mut());
        waiting.into_iter().for_each(Waker::wake);
    }

    /// Whether the turn was told to stop.
    pub fn is_stopped(&self) -> bool {
        self.0.set.get()
    }

    /// Whether two handles are the same signal.
    pub fn same(&self, other: &Stop) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }

    fn wake_me(&self, waker: &Waker) {
        let mut waiting = self.0.waiting.borrow_mut();
        if !waiting.iter().any(|w| w.will_wake(waker)) {
            waiting.push(waker.clone());
        }
    }
}

/// Runs `work` until it is done (`Some`) or `stop` is set (`None`: the caller then drops `work`
/// where it was, which ends a model call's connection). Takes the work as a trait object, so
/// the model call's code is not copied into this one.
pub(crate) async fn until_stopped<T>(stop: &Stop, mut work: Pin<&mut dyn Future<Output = T>>) -> Option<T> {
    poll_fn(|cx| {
        if stop.is_stopped() {
            return Poll::Ready(None);
        }
        if let Poll::Ready(v) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        stop.wake_me(cx.waker());
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::{until_stopped, Stop};
    use futures::executor::LocalPool;
    use futures::task::LocalSpawnExt;
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn a_stop_ends_the_work_it_waits_beside() {
        let mut pool = LocalPool::new();
        let stop = Stop::default();
        let out = Rc::new(Cell::new(None));
        let (s, o) = (stop.clone(), out.clone());
        // Work that never finishes (a silent model).
        pool.spawner()
            .spawn_local(async move {
                let work = std::pin::pin!(std::future::pending::<u8>());
                o.set(Some(until_stopped(&s, work).await))
            })
            .unwrap();
        pool.run_until_stalled();
        assert_eq!(out.get(), None, "still waiting");
        stop.stop();
        pool.run_until_stalled();
        assert_eq!(out.get(), Some(None), "stopped, the work dropped");
        let done = std::pin::pin!(async { 7 });
        assert_eq!(futures::executor::block_on(until_stopped(&Stop::default(), done)), Some(7));
    }
}
