// @ts-check
// uPlot (vendor/uplot) formats dates with the browser's language as it
// loads. A window started with LANG=C (a test's, a minimal desktop's)
// reports the language "C", which Intl refuses with a RangeError, and the
// charts would never load: such a page falls back to English. Loaded as a
// plain script before uPlot.
(() => {
  try {
    new Intl.DateTimeFormat(navigator.language);
  } catch {
    Object.defineProperty(navigator, 'language', { get: () => 'en-US' });
    Object.defineProperty(navigator, 'languages', { get: () => ['en-US'] });
  }
})();
