/**
 * A rules error's position travels with the error (issue 21): from the WardenError to its wire form and back, into the
 * one JSON error body as Line and Column, and from that body into the client's ApiError. Errors without a position
 * keep the shape they always had.
 */
import { expect } from 'chai'
import { errorFromAnswer } from '../../../src/api/errors.js'
import { errorBody } from '../../../src/http/errors.js'
import { errorFromWire, InvalidInputError, WardenError } from '../../../src/lib/errors.js'

describe('error positions', () => {
  it('an InvalidInputError with a position keeps it through its wire form', () => {
    const error = new InvalidInputError('Rules', 'unknown resource "x" at line 2, column 1', { line: 2, column: 1 })
    const wire = error.toWire()
    expect(wire).to.deep.equal({ code: 'invalid_input', message: 'Rules: unknown resource "x" at line 2, column 1', field: 'Rules', line: 2, column: 1 })
    expect(errorFromWire(wire).position).to.deep.equal({ line: 2, column: 1 })
  })

  it('an error without a position has none on the wire', () => {
    const wire = new WardenError('not_found', 'gone').toWire()
    expect(wire).to.deep.equal({ code: 'not_found', message: 'gone' })
    expect(errorFromWire(wire).position).to.equal(undefined)
  })

  it('the body carries Line and Column only when there is a position', () => {
    expect(errorBody('invalid_input', 'Rules: bad', 'Rules', { line: 3, column: 12 })).to.deep.equal({ Error: 'Rules: bad', Code: 'invalid_input', Field: 'Rules', Line: 3, Column: 12 })
    expect(errorBody('invalid_input', 'Name: bad', 'Name')).to.deep.equal({ Error: 'Name: bad', Code: 'invalid_input', Field: 'Name' })
  })

  it('the client rebuilds the position from the body', () => {
    const body = { Error: 'Rules: bad', Code: 'invalid_input', Field: 'Rules', Line: 3, Column: 12 }
    const error = errorFromAnswer(400, body, JSON.stringify(body))
    expect(error.field).to.equal('Rules')
    expect(error.position).to.deep.equal({ line: 3, column: 12 })
    expect(errorFromAnswer(400, { Error: 'x', Code: 'invalid_input' }, '').position).to.equal(undefined)
  })
})
