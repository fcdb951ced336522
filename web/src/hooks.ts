import { useCallback, useEffect, useRef, useState } from "preact/hooks";

import { asApiError, type ApiError } from "./api.js";

export interface Resource<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  /** Fetches again; `quiet` keeps the current data on screen meanwhile. */
  reload: (quiet?: boolean) => void;
}

/**
 * Data from `load`, fetched again when `deps` change and, with `refreshMs`,
 * every so often while `refresh` holds (quietly: the view does not flash).
 */
export function useResource<T>(
  load: (signal: AbortSignal) => Promise<T>,
  deps: unknown[],
  options: { refreshMs?: number; refresh?: boolean } = {},
): Resource<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const quietRef = useRef(false);
  const loadRef = useRef(load);
  loadRef.current = load;

  useEffect(() => {
    const controller = new AbortController();
    if (!quietRef.current) {
      // New parameters: no stale rows of the previous ones meanwhile.
      setLoading(true);
      setData(undefined);
      setError(undefined);
    }
    quietRef.current = false;
    loadRef
      .current(controller.signal)
      .then((value) => {
        if (controller.signal.aborted) return;
        setData(value);
        setError(undefined);
        setLoading(false);
      })
      .catch((e: unknown) => {
        if (controller.signal.aborted) return;
        setError(asApiError(e));
        setLoading(false);
      });
    return () => controller.abort();
  }, [...deps, tick]);

  const reload = useCallback((quiet = false) => {
    quietRef.current = quiet;
    setTick((t) => t + 1);
  }, []);

  const { refreshMs, refresh = true } = options;
  useEffect(() => {
    if (!refreshMs || !refresh) return;
    const timer = setInterval(() => reload(true), refreshMs);
    return () => clearInterval(timer);
  }, [refreshMs, refresh, reload]);

  return { data, error, loading, reload };
}

/** Sets the document title while mounted. */
export function useTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · Hearth console`;
  }, [title]);
}
