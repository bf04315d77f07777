// <os/log.h>: its Swift API (OSLog, OSLogType, os_log) is in the overlay, os.swift.
