// Whether a path exists: false only when it is missing; any other error (permissions, I/O) is
// the caller's to see.

export async function pathExists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}
