// Prints the start request the official E2B JS SDK makes of one template that uses its
// build options (runCmd with a list, copy with forceUpload, skipCache), with the files
// hash of its COPY computed in SDK_WIRE_CONTEXT, as JSON on stdout. No server is called:
// Template.toJSON is the body Template.build sends.

import { Template } from 'e2b'

const context = process.env.SDK_WIRE_CONTEXT
if (!context) {
  console.error('wire: SDK_WIRE_CONTEXT is not set')
  process.exit(2)
}
const template = Template({ fileContextPath: context })
  .fromImage('debian')
  .runCmd(['apt-get update', 'apt-get install -y curl'])
  .copy('a.txt', '/opt/a.txt', { forceUpload: true })
  .runCmd('echo cached')
  .skipCache()
  .runCmd('echo fresh', { user: 'root' })
  .runCmd('echo after')
console.log(await Template.toJSON(template, true))
