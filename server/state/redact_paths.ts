// Error messages the server shows to anyone who asks (/health) must not tell them where things
// live on the machine: a model that failed to load names its files by absolute path, which gives
// away user names and directory layout. redactPaths keeps each path's last component, which is
// what says which file was wrong ("…/config.json"); the full message stays in the server's log.

/** An absolute POSIX path, `file://` URL or Windows drive path, up to a quote or whitespace. */
const ABSOLUTE_PATH = /(?:file:\/\/)?(?:[A-Za-z]:)?[\\/][^\s'"`<>|]*/g;

/** `message` with every absolute path cut down to "…/" and its last component. */
export function redactPaths(message: string): string {
  return message.replace(ABSOLUTE_PATH, (path, at: number) => {
    // Only a path that starts a word: not the "/s" in "tokens/s" or "and/or", nor a web URL's.
    const before = at > 0 ? message[at - 1] : " ";
    if (/[\w.~:-]/.test(before)) return path;
    const trailing = /[.,;:)\]]+$/.exec(path)?.[0] ?? "";
    const core = path.slice(0, path.length - trailing.length);
    const last = core.split(/[\\/]/).filter(Boolean).at(-1);
    return (last ? `…/${last}` : "…") + trailing;
  });
}
