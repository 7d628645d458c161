"""The partition cache: a thread's context laid out from stored history so the prompt prefix
stays byte-stable (persona, summary parts, zones A and B, the current turn), rotated with
summaries, and the threads it keeps."""
