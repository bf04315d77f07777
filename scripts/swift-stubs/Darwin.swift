// Apple's C library module under its own name: Tauri's iOS API calls `Darwin.pipe`. On Linux
// the same POSIX functions are Glibc's.
@_exported import Glibc
