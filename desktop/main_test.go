package desktop

import (
	"os"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopBrowser()
	harness.RemoveBinary()
	os.Exit(code)
}
