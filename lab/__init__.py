"""The lab: experiments that each answered one question about the extender, the results
they wrote, and the dated notebook of what was measured (lab/README.md). Not part of the
package users install, nor of its tests: it depends on `extender` and `bench`, and
nothing there depends on it."""
