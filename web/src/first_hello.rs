//! When this page's first hello has left for the relay. app.js opens xterm.js's terminal and
//! wires the page after that (docs/BENCHMARKS.md, "The hello before xterm.js opens"): the link's
//! pushed challenge is read on the page's main thread, and 20-50 ms of opening before it would
//! hold the hello back by as much.

use std::cell::RefCell;

use wasm_bindgen::JsValue;

enum State {
    /// The resolvers of the promises handed out so far.
    Waiting(Vec<js_sys::Function>),
    Sent,
}

thread_local! {
    static STATE: RefCell<State> = const { RefCell::new(State::Waiting(Vec::new())) };
}

/// A hello was written on a link: the first one resolves every promise handed out.
pub fn sent() {
    let waiting = STATE.with(|s| std::mem::replace(&mut *s.borrow_mut(), State::Sent));
    if let State::Waiting(resolvers) = waiting {
        for resolve in resolvers {
            // A resolver does not throw.
            let _ = resolve.call0(&JsValue::UNDEFINED);
        }
    }
}

/// A promise that resolves once the first hello has left (at once if it has).
pub fn when_sent() -> js_sys::Promise {
    js_sys::Promise::new(&mut |resolve, _reject| {
        STATE.with(|s| match &mut *s.borrow_mut() {
            State::Waiting(resolvers) => resolvers.push(resolve),
            State::Sent => {
                let _ = resolve.call0(&JsValue::UNDEFINED);
            }
        });
    })
}
