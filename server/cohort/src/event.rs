//! Ready events and the route interner. Routes are strings at the edges (CSV,
//! per-route K overrides, reports) and dense `u32` ids inside, so the analyzer
//! can bucket by route with a counting sort.

use std::collections::HashMap;

use crate::Error;

/// One ready event: it may launch at any integer time τ with
/// `release_ns <= τ <= deadline_ns`, together with events of the same route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Event {
    /// Release time `t_i` in nanoseconds.
    pub release_ns: i64,
    /// Launch deadline `d_i` in nanoseconds, inclusive; never before `release_ns`.
    pub deadline_ns: i64,
    /// Route id from the [`Routes`] interner of the owning collection.
    pub route: u32,
}

/// Interns route names as dense ids `0..len()`, in order of first sight.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    names: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Routes {
    /// An empty interner.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `name`, assigning the next free id on first sight.
    ///
    /// # Panics
    /// If more than `u32::MAX` distinct routes are interned.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).expect("more than u32::MAX routes");
        self.names.push(name.to_owned());
        self.ids.insert(name.to_owned(), id);
        id
    }

    /// The id of an already interned route.
    pub fn id(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    /// The name of route `id`.
    pub fn name(&self, id: u32) -> Option<&str> {
        self.names.get(id as usize).map(String::as_str)
    }

    /// Number of distinct routes.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no route has been interned.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Route names in id order.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }
}

/// An event log: events plus the interner their route ids refer to.
#[derive(Debug, Clone, Default)]
pub struct Events {
    events: Vec<Event>,
    routes: Routes,
}

impl Events {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an event of route `route`.
    ///
    /// # Errors
    /// [`Error::Invalid`] if `deadline_ns < release_ns`.
    pub fn push(&mut self, release_ns: i64, deadline_ns: i64, route: &str) -> Result<Event, Error> {
        if deadline_ns < release_ns {
            return Err(Error::Invalid(format!(
                "deadline_ns {deadline_ns} is before release_ns {release_ns}"
            )));
        }
        let event = Event {
            release_ns,
            deadline_ns,
            route: self.routes.intern(route),
        };
        self.events.push(event);
        Ok(event)
    }

    /// The events in insertion order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The interner the events' route ids refer to.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub(crate) fn push_interned(&mut self, event: Event) {
        self.events.push(event);
    }

    pub(crate) fn routes_mut(&mut self) -> &mut Routes {
        &mut self.routes
    }
}
