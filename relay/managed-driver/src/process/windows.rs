//! Processes on Windows: the browser started by `CreateProcessW` with the
//! pipe as two inherited handles and no other handle of ours (a handle
//! list), a Job Object per browser (killed with every helper when it
//! closes, so a serve that dies takes its browsers along), termination.
//!
//! `unsafe` lives only here, in `macos.rs` beside it, in serve's console
//! and signals, and in `state-dir`'s Windows privacy (`tidy.rs` holds that list). Here
//! each block is one Win32 call through `windows-sys` (no safe maintained
//! wrapper covers handle inheritance and job accounting together), on
//! handles this module owns.
#![allow(unsafe_code)]

use std::io::{Read, Write};
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::Path;

use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, FILETIME, GetLastError, HANDLE, HANDLE_FLAG_INHERIT, STILL_ACTIVE, SetHandleInformation,
    WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectBasicAccountingInformation,
    JobObjectExtendedLimitInformation, QueryInformationJobObject, SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, CREATE_SUSPENDED, CreateProcessW, DeleteProcThreadAttributeList,
    EXTENDED_STARTUPINFO_PRESENT, GetExitCodeProcess, GetProcessTimes, InitializeProcThreadAttributeList,
    LPPROC_THREAD_ATTRIBUTE_LIST, OpenProcess, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, PROCESS_INFORMATION,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_TERMINATE, ResumeThread, STARTF_USESTDHANDLES, STARTUPINFOEXW,
    TerminateProcess, UpdateProcThreadAttribute, WaitForSingleObject,
};

use super::{Ending, Launched, io_pipes_switch, windows_command_line};

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

    fn assign(&self, child: &Child) -> std::io::Result<()> {
        // SAFETY: both handles are open for the duration of the call.
        match unsafe { AssignProcessToJobObject(self.handle(), child.process.as_raw_handle()) } {
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

/// A browser this process launched: its process handle, which keeps the
/// pid from being handed out while we hold it, as `std::process::Child`'s
/// does.
#[derive(Debug)]
pub(crate) struct Child {
    process: OwnedHandle,
    pid: u32,
}

impl Child {
    pub(crate) fn id(&self) -> u32 {
        self.pid
    }

    /// Its exit status once it has exited, `None` while it runs.
    pub(crate) fn try_wait(&self) -> std::io::Result<Option<std::process::ExitStatus>> {
        use std::os::windows::process::ExitStatusExt;
        // SAFETY: the handle is open; a zero timeout only polls.
        match unsafe { WaitForSingleObject(self.process.as_raw_handle(), 0) } {
            WAIT_TIMEOUT => return Ok(None),
            WAIT_OBJECT_0 => {}
            _ => return Err(std::io::Error::last_os_error()),
        }
        let mut code = 0u32;
        // SAFETY: the handle is open; `code` is written by the call.
        match unsafe { GetExitCodeProcess(self.process.as_raw_handle(), &raw mut code) } {
            0 => Err(std::io::Error::last_os_error()),
            _ => Ok(Some(std::process::ExitStatus::from_raw(code))),
        }
    }
}

/// Makes `handle` inheritable: only a child whose handle list names it
/// gets it.
fn set_inheritable(handle: HANDLE) -> std::io::Result<()> {
    // SAFETY: the handle is open (the caller holds it for the call).
    match unsafe { SetHandleInformation(handle, HANDLE_FLAG_INHERIT, HANDLE_FLAG_INHERIT) } {
        0 => Err(std::io::Error::last_os_error()),
        _ => Ok(()),
    }
}

/// A process attribute list holding one attribute,
/// `PROC_THREAD_ATTRIBUTE_HANDLE_LIST`: the only handles a child created
/// with it inherits, whatever else of ours is inheritable.
struct HandleList {
    /// The list, initialised, in memory of the size Windows asked for
    /// (`usize`s, for its alignment).
    list: Vec<usize>,
    /// The handles: the list points into this, so it lives as long.
    handles: Box<[HANDLE]>,
}

impl HandleList {
    fn new(handles: &[HANDLE]) -> std::io::Result<Self> {
        let mut size = 0usize;
        // SAFETY: a null list asks for the size only (the call then fails
        // with ERROR_INSUFFICIENT_BUFFER, by design), written to `size`.
        unsafe { InitializeProcThreadAttributeList(std::ptr::null_mut(), 1, 0, &raw mut size) };
        if size == 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut memory = vec![0usize; size.div_ceil(size_of::<usize>())];
        // SAFETY: the memory holds `size` bytes, aligned for the list.
        if unsafe { InitializeProcThreadAttributeList(memory.as_mut_ptr().cast(), 1, 0, &raw mut size) } == 0 {
            return Err(std::io::Error::last_os_error());
        }
        // From here `Drop` deletes the list; moving the `Vec` and the `Box`
        // leaves their memory where it is.
        let mut list = Self { list: memory, handles: handles.into() };
        let (value, bytes) = (list.handles.as_ptr(), size_of_val(&*list.handles));
        // SAFETY: the list is initialised; the handles it points at live in
        // `list.handles`, as long as the list.
        let updated = unsafe {
            UpdateProcThreadAttribute(
                list.as_ptr(),
                0,
                PROC_THREAD_ATTRIBUTE_HANDLE_LIST as usize,
                value.cast(),
                bytes,
                std::ptr::null_mut(),
                std::ptr::null(),
            )
        };
        match updated {
            0 => Err(std::io::Error::last_os_error()),
            _ => Ok(list),
        }
    }

    fn as_ptr(&mut self) -> LPPROC_THREAD_ATTRIBUTE_LIST {
        self.list.as_mut_ptr().cast()
    }
}

impl Drop for HandleList {
    fn drop(&mut self) {
        // SAFETY: the list was initialised before `self` was made.
        unsafe { DeleteProcThreadAttributeList(self.as_ptr()) };
    }
}

/// `text` as UTF-16 with its terminating NUL, for a Win32 call.
fn wide_nul(text: &[u16]) -> Vec<u16> {
    text.iter().copied().chain([0]).collect()
}

/// Spawns `executable` with the switch that names the browser's ends of
/// the pipe, then `args`, in a Job Object of its own: created suspended,
/// put in the job, then let run, so neither it nor any helper it starts
/// ever runs outside the job. It inherits exactly its stdin and stdout
/// (`NUL`), `stderr` and its two ends of the pipe: they are the handle
/// list of its `CreateProcessW`, so nothing else serve holds inheritable
/// (another child's pipes, a handle a library marked so) reaches it.
pub(super) fn spawn(
    executable: &Path,
    args: &[String],
    stderr: std::fs::File,
    browser_reads: std::io::PipeReader,
    browser_writes: std::io::PipeWriter,
) -> std::io::Result<Launched> {
    let tree = Tree::new()?;
    let nul = std::fs::OpenOptions::new().read(true).write(true).open("NUL")?;
    // An inherited handle keeps its value in the child.
    let switch = io_pipes_switch(browser_reads.as_raw_handle() as usize, browser_writes.as_raw_handle() as usize);
    let program: Vec<u16> = executable.as_os_str().encode_wide().collect();
    let args: Vec<Vec<u16>> = std::iter::once(&switch).chain(args).map(|a| a.encode_utf16().collect()).collect();
    let mut line = wide_nul(&windows_command_line(&program, args.iter().map(Vec::as_slice))?);
    let program = wide_nul(&program);
    let inherited =
        [nul.as_raw_handle(), stderr.as_raw_handle(), browser_reads.as_raw_handle(), browser_writes.as_raw_handle()];
    let mut handle_list = HandleList::new(&inherited)?;
    // SAFETY: a zeroed plain-data struct is valid; filled in below.
    let mut startup: STARTUPINFOEXW = unsafe { std::mem::zeroed() };
    startup.StartupInfo.cb = size_of::<STARTUPINFOEXW>() as u32;
    startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    startup.StartupInfo.hStdInput = nul.as_raw_handle();
    startup.StartupInfo.hStdOutput = nul.as_raw_handle();
    startup.StartupInfo.hStdError = stderr.as_raw_handle();
    startup.lpAttributeList = handle_list.as_ptr();
    // A handle in the list must be inheritable; no other child of ours
    // takes it, each having a list of its own. (A child some other code
    // in serve starts, with no list, in this moment before our copies
    // close, would: `std::process::Command` takes no list.)
    for handle in inherited {
        set_inheritable(handle)?;
    }
    // Not in our console's group: a Ctrl-C there is serve's to handle.
    let flags = CREATE_NEW_PROCESS_GROUP | CREATE_SUSPENDED | EXTENDED_STARTUPINFO_PRESENT;
    // SAFETY: a zeroed plain-data struct, filled by the call.
    let mut created: PROCESS_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: both strings are NUL-terminated and live through the call
    // (the line is writable, as the call requires); `startup` and its
    // attribute list, and the handles the list names, are alive; a null
    // environment and folder are ours.
    let ok = unsafe {
        CreateProcessW(
            program.as_ptr(),
            line.as_mut_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            1,
            flags,
            std::ptr::null(),
            std::ptr::null(),
            (&raw const startup).cast(),
            &raw mut created,
        )
    };
    let spawned = if ok == 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) };
    // Our copies of what the browser inherited close now: its exit is our
    // end-of-file on the pipe.
    drop((handle_list, nul, stderr, browser_reads, browser_writes));
    spawned?;
    // SAFETY: a fresh handle from the call, nobody else's.
    let thread = unsafe { OwnedHandle::from_raw_handle(created.hThread) };
    // SAFETY: as the thread's.
    let process = unsafe { OwnedHandle::from_raw_handle(created.hProcess) };
    let child = Child { process, pid: created.dwProcessId };
    if let Err(error) = tree.assign(&child).and_then(|()| resume(&thread)) {
        // SAFETY: the process handle is open; it never ran, or runs in the job.
        unsafe { TerminateProcess(child.process.as_raw_handle(), 1) };
        return Err(error);
    }
    Ok(Launched { child, tree })
}

/// Lets the suspended `thread` run.
fn resume(thread: &OwnedHandle) -> std::io::Result<()> {
    // SAFETY: the handle is open.
    match unsafe { ResumeThread(thread.as_raw_handle()) } {
        u32::MAX => Err(std::io::Error::last_os_error()),
        _ => Ok(()),
    }
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
