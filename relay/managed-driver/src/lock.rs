//! The one way this crate takes its mutexes.

use std::sync::{Mutex, MutexGuard};

/// A lock that a panic elsewhere does not poison for good.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
