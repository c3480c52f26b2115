//! Processes on Windows: the pipe as two inherited handles, a Job Object
//! per browser (killed with every helper when it closes, so a serve that
//! dies takes its browsers along), termination.
//!
//! `unsafe` lives only here, in `macos.rs` beside it, in serve's console
//! and in `state-dir`'s Windows privacy (`tidy.rs` holds that list). Here
//! each block is one Win32 call through `windows-sys` (no safe maintained
//! wrapper covers handle inheritance and job accounting together), on
//! handles this module owns.
#![allow(unsafe_code)]

use std::io::{Read, Write};
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::os::windows::process::CommandExt;
use std::sync::Mutex;

use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, FILETIME, GetLastError, HANDLE, HANDLE_FLAG_INHERIT, STILL_ACTIVE, SetHandleInformation,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectBasicAccountingInformation,
    JobObjectExtendedLimitInformation, QueryInformationJobObject, SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, GetExitCodeProcess, GetProcessTimes, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    PROCESS_TERMINATE, TerminateProcess,
};

use super::{Ending, Launched, io_pipes_switch};

/// Our end of the pipe the browser writes: bytes a thread reads from the
/// OS pipe (anonymous pipes have no overlapped I/O for tokio to await).
pub(crate) type BrowserReader = tokio::io::DuplexStream;
/// Our end of the pipe the browser reads: a thread writes what arrives.
pub(crate) type BrowserWriter = tokio::io::DuplexStream;

/// How much a bridge holds between the OS pipe and the async side.
const BRIDGE: usize = 256 << 10;

/// The Job Object holding a browser and every process it starts.
#[derive(Debug)]
pub(crate) struct Tree {
    job: OwnedHandle,
}

impl Tree {
    fn new() -> std::io::Result<Self> {
        // SAFETY: no attributes, no name; the handle is checked, then owned.
        let job = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if job.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh handle nobody else owns.
        let tree = Self { job: unsafe { OwnedHandle::from_raw_handle(job) } };
        // SAFETY: a zeroed plain-data struct is a valid "no limits".
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: the struct and its size match the class asked for.
        let set = unsafe {
            SetInformationJobObject(
                tree.handle(),
                JobObjectExtendedLimitInformation,
                (&raw const limits).cast(),
                size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        if set == 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(tree)
    }

    fn handle(&self) -> HANDLE {
        self.job.as_raw_handle()
    }

    fn assign(&self, child: &std::process::Child) -> std::io::Result<()> {
        // SAFETY: both handles are open for the duration of the call.
        match unsafe { AssignProcessToJobObject(self.handle(), child.as_raw_handle()) } {
            0 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        }
    }

    fn terminate(&self) {
        // SAFETY: the job handle is open.
        unsafe { TerminateJobObject(self.handle(), 1) };
    }

    fn active_processes(&self) -> u32 {
        // SAFETY: a zeroed plain-data struct, filled by the call.
        let mut accounting: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: the struct and its size match the class asked for.
        let ok = unsafe {
            QueryInformationJobObject(
                self.handle(),
                JobObjectBasicAccountingInformation,
                (&raw mut accounting).cast(),
                size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 { 0 } else { accounting.ActiveProcesses }
    }
}

/// Makes `handle` inherited by the next child, or not.
fn set_inherited(handle: &impl AsRawHandle, inherited: bool) -> std::io::Result<()> {
    let flags = if inherited { HANDLE_FLAG_INHERIT } else { 0 };
    // SAFETY: the handle is open (borrowed for the call).
    match unsafe { SetHandleInformation(handle.as_raw_handle(), HANDLE_FLAG_INHERIT, flags) } {
        0 => Err(std::io::Error::last_os_error()),
        _ => Ok(()),
    }
}

/// Handles are inherited by every child spawned while they are marked so:
/// one spawn at a time keeps each browser's pipe out of another's hands
/// (a browser holding another's pipe would keep it open after that one
/// exits).
static SPAWNING: Mutex<()> = Mutex::new(());

/// Spawns `command` with the switch that names the browser's ends of the
/// pipe, then `args`, in a Job Object of its own.
pub(super) fn spawn(
    mut command: std::process::Command,
    args: &[String],
    browser_reads: std::io::PipeReader,
    browser_writes: std::io::PipeWriter,
) -> std::io::Result<Launched> {
    let tree = Tree::new()?;
    let child = {
        let _one_at_a_time = SPAWNING.lock().unwrap_or_else(|p| p.into_inner());
        set_inherited(&browser_reads, true)?;
        set_inherited(&browser_writes, true)?;
        // An inherited handle keeps its value in the child.
        let switch = io_pipes_switch(browser_reads.as_raw_handle() as usize, browser_writes.as_raw_handle() as usize);
        command.arg(switch).args(args);
        // Not in our console's group: a Ctrl-C there is serve's to handle.
        command.creation_flags(CREATE_NEW_PROCESS_GROUP);
        let spawned = command.spawn();
        // Our copies of the browser's ends close before the next spawn may
        // inherit them.
        drop((browser_reads, browser_writes));
        spawned?
    };
    // Chrome starts its first helper tens of milliseconds after it starts;
    // it is in the job by then, and so is every helper after it.
    if let Err(error) = tree.assign(&child) {
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        return Err(error);
    }
    Ok(Launched { child, tree })
}

pub(super) fn reader(mut end: std::io::PipeReader) -> std::io::Result<BrowserReader> {
    use tokio::io::AsyncWriteExt;
    let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
    let (ours, mut theirs) = tokio::io::duplex(BRIDGE);
    std::thread::Builder::new().name("browser-pipe-reader".into()).spawn(move || {
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            let n = match end.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if runtime.block_on(theirs.write_all(&chunk[..n])).is_err() {
                break;
            }
        }
        // `theirs` drops: our reader sees end-of-file.
    })?;
    Ok(ours)
}

pub(super) fn writer(mut end: std::io::PipeWriter) -> std::io::Result<BrowserWriter> {
    use tokio::io::AsyncReadExt;
    let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
    let (ours, mut theirs) = tokio::io::duplex(BRIDGE);
    std::thread::Builder::new().name("browser-pipe-writer".into()).spawn(move || {
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            let n = match runtime.block_on(theirs.read(&mut chunk)) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if end.write_all(&chunk[..n]).is_err() {
                break;
            }
        }
        // `end` drops: the browser reads end-of-file and quits.
    })?;
    Ok(ours)
}

/// The process `pid`, opened with `access`, or why not.
fn open_process(pid: u32, access: u32) -> Result<OwnedHandle, u32> {
    // SAFETY: a plain call; the handle is checked, then owned.
    let handle = unsafe { OpenProcess(access, 0, pid) };
    if handle.is_null() {
        // SAFETY: reads this thread's last error.
        return Err(unsafe { GetLastError() });
    }
    // SAFETY: a fresh handle nobody else owns.
    Ok(unsafe { OwnedHandle::from_raw_handle(handle) })
}

pub(super) fn is_alive(pid: u32) -> bool {
    match open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION) {
        Ok(process) => {
            let mut code = 0u32;
            // SAFETY: the handle is open; `code` is written by the call.
            let ok = unsafe { GetExitCodeProcess(process.as_raw_handle(), &raw mut code) };
            ok != 0 && code == STILL_ACTIVE as u32
        }
        // It exists, and is not ours to look at.
        Err(error) => error == ERROR_ACCESS_DENIED,
    }
}

/// The process's creation time (100 ns since 1601).
pub(super) fn started(pid: u32) -> Option<u64> {
    let process = open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION).ok()?;
    let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
    let [mut created, mut exited, mut kernel, mut user] = [zero; 4];
    // SAFETY: the handle is open; the four structs are written by the call.
    let ok = unsafe {
        GetProcessTimes(process.as_raw_handle(), &raw mut created, &raw mut exited, &raw mut kernel, &raw mut user)
    };
    (ok != 0).then(|| (u64::from(created.dwHighDateTime) << 32) | u64::from(created.dwLowDateTime))
}

pub(super) fn end_tree(pid: u32, ours: Option<&Tree>, _ending: Ending) {
    // Chrome on Windows has no console to receive a Ctrl-C: asking is
    // `Browser.close` over the pipe, which the caller did first.
    match ours {
        Some(tree) => tree.terminate(),
        None => {
            if let Ok(process) = open_process(pid, PROCESS_TERMINATE) {
                // SAFETY: the handle is open.
                unsafe { TerminateProcess(process.as_raw_handle(), 1) };
            }
        }
    }
}

pub(super) fn tree_alive(pid: u32, ours: Option<&Tree>) -> bool {
    match ours {
        Some(tree) => tree.active_processes() > 0,
        None => is_alive(pid),
    }
}

pub(super) fn has_argument(_pid: u32, _arg: &str) -> Option<bool> {
    None
}

pub(super) fn is_superuser() -> bool {
    false
}
