// Whether a path exists, is a directory, is a file: false only when it is missing (or is the other
// kind, or a part of it that should be a directory is a file: "model.gguf/config.json"); any other
// error (permissions, I/O) is the caller's to see.

const missing = (e: unknown) =>
  e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory;

export async function pathExists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (e) {
    if (missing(e)) return false;
    throw e;
  }
}

export async function isDir(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isDirectory;
  } catch (e) {
    if (missing(e)) return false;
    throw e;
  }
}

export async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch (e) {
    if (missing(e)) return false;
    throw e;
  }
}
