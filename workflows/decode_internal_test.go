package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReplayedMessagesSurviveARemovedField checks an update recorded with a field this code
// no longer has (removed since) still applies when its history is replayed (the handler
// replays, leniently; the validator does not run), while a new update with that field is
// refused. Signals are decoded strictly live and on replay alike: their verdict is not
// recorded, so a lenient replay would apply one that was rejected (a non-determinism error);
// a field removed from a signal's request type stays as a deprecated, ignored field.
func TestReplayedMessagesSurviveARemovedField(t *testing.T) {
	st := fuzzState()
	pause := fuzzControls(st)[2]
	require.Equal(t, UpdatePause, pause.name)
	recorded := jsonRaw([]byte(`{"direction":"down","reason":"freeze","until":"friday"}`))

	validator := pause.validator
	require.ErrorContains(t, validator(nil, recorded), `unknown field "until"`, "a new update is decoded strictly")
	_, err := pause.signal(recorded)
	require.ErrorContains(t, err, `unknown field "until"`, "a new signal too")
	require.False(t, st.Overrides.PauseScaleDown)

	handler := pause.handler
	res, err := handler(nil, recorded)
	require.NoError(t, err, "the recorded update replays")
	require.Equal(t, "scale-down paused, scale-up active", res.Message)
	require.Equal(t, "freeze", st.Overrides.PauseReason)

}
